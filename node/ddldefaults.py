"""Whether a column an ``ALTER TABLE … ADD`` gives the table's rows gets the same values when
the statement is replayed on a target: its ``DEFAULT`` fills every existing row where the
statement runs, with no row event (:func:`node.ddlclauses.unrepeatable_column` asks).

An allow-list: a default made only of literals, operators, column names and the functions
of :data:`REPEATABLE` (their value depends on their arguments alone, or on the statement's
timestamp, which a replay runs under) is replayed; any other function pauses: one that makes
a new value on every call (UUID(), RAND(), RANDOM_BYTES()), reads a sequence (NEXTVAL(s),
NEXT VALUE FOR s, LASTVAL, SETVAL), the session (USER(), CURRENT_USER, CONNECTION_ID(),
DATABASE(): another name where the schema is mapped), the server (VERSION(), @@hostname) or
a setting a target may not share (DATE_FORMAT's and DAYNAME's lc_time_names, WEEK's
default_week_format), and any function setl does not know. An inline ``REFERENCES t (id)`` of
the definition is not its default (:func:`own_definition`)."""

from __future__ import annotations

from node.sqllex import NAME, SYMBOL, WORD, Token, identifier

# functions of their arguments alone, and the statement's clock (a replay runs under the
# source's timestamp: CURRENT_TIMESTAMP, NOW(6), UTC_TIMESTAMP, CURDATE, …); the type names a
# CAST or CONVERT holds (DECIMAL(10,2)) are here too
REPEATABLE = frozenset((
    # the statement's clock
    "CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP", "CURDATE", "CURRENT_DATE",
    "CURTIME", "CURRENT_TIME", "UTC_TIMESTAMP", "UTC_DATE", "UTC_TIME", "UNIX_TIMESTAMP",
    # numbers
    "ABS", "ACOS", "ASIN", "ATAN", "ATAN2", "CEIL", "CEILING", "CONV", "COS", "COT", "CRC32",
    "CRC32C", "DEGREES", "EXP", "FLOOR", "GREATEST", "LEAST", "LN", "LOG", "LOG10", "LOG2",
    "MOD", "OCT", "PI", "POW", "POWER", "RADIANS", "ROUND", "SIGN", "SIN", "SQRT", "TAN",
    "TRUNCATE", "BIT_COUNT",
    # strings
    "ASCII", "BIN", "BIT_LENGTH", "CHAR", "CHAR_LENGTH", "CHARACTER_LENGTH", "CHR", "CONCAT",
    "CONCAT_WS", "ELT", "EXPORT_SET", "FIELD", "FIND_IN_SET", "FROM_BASE64", "HEX", "INSERT",
    "INSTR", "LCASE", "LEFT", "LENGTH", "LENGTHB", "LOCATE", "LOWER", "LPAD", "LTRIM",
    "MAKE_SET", "MID", "OCTET_LENGTH", "ORD", "POSITION", "QUOTE", "REPEAT", "REPLACE",
    "REVERSE", "RIGHT", "RPAD", "RTRIM", "SOUNDEX", "SPACE", "STRCMP", "SUBSTR", "SUBSTRING",
    "SUBSTRING_INDEX", "TO_BASE64", "TRIM", "UCASE", "UNHEX", "UPPER", "REGEXP_REPLACE",
    "REGEXP_SUBSTR", "REGEXP_INSTR", "NATURAL_SORT_KEY", "MD5", "SHA", "SHA1", "SHA2",
    "INET_ATON", "INET_NTOA", "INET6_ATON", "INET6_NTOA", "IS_IPV4", "IS_IPV6",
    # conditions and casts (and the types they name)
    "IF", "IFNULL", "NULLIF", "COALESCE", "ISNULL", "NVL", "NVL2", "CAST", "CONVERT",
    "BINARY", "DECIMAL", "DOUBLE", "FLOAT", "SIGNED", "UNSIGNED", "INT", "INTEGER", "NCHAR",
    "VARCHAR", "DATE", "DATETIME", "TIME", "TIMESTAMP", "INTERVAL",
    # dates from dates (not from a locale's or a week mode's settings)
    "ADDDATE", "ADDTIME", "DATE_ADD", "DATE_SUB", "DATEDIFF", "DAY", "DAYOFMONTH",
    "DAYOFWEEK", "DAYOFYEAR", "EXTRACT", "FROM_DAYS", "HOUR", "LAST_DAY", "MAKEDATE",
    "MAKETIME", "MICROSECOND", "MINUTE", "MONTH", "PERIOD_ADD", "PERIOD_DIFF", "QUARTER",
    "SECOND", "SEC_TO_TIME", "SUBDATE", "SUBTIME", "TIME_TO_SEC", "TIMEDIFF", "TIMESTAMPADD",
    "TIMESTAMPDIFF", "TO_DAYS", "TO_SECONDS", "WEEKDAY", "WEEKOFYEAR", "YEAR", "STR_TO_DATE",
    # a date from a Unix time, in the session's time zone (logged with the statement, which
    # used it, and replayed under it)
    "FROM_UNIXTIME",
    # geometry made of their arguments (POINT(1, 2), ST_GeomFromText('POINT(1 2)', 4326))
    "POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING", "MULTIPOLYGON",
    "GEOMETRYCOLLECTION", "ST_GEOMFROMTEXT", "ST_GEOMETRYFROMTEXT", "GEOMFROMTEXT",
    "GEOMETRYFROMTEXT", "ST_POINTFROMTEXT", "POINTFROMTEXT", "ST_LINEFROMTEXT",
    "ST_LINESTRINGFROMTEXT", "LINEFROMTEXT", "ST_POLYFROMTEXT", "ST_POLYGONFROMTEXT",
    "POLYFROMTEXT", "ST_MPOINTFROMTEXT", "ST_MLINEFROMTEXT", "ST_MPOLYFROMTEXT",
    "ST_GEOMCOLLFROMTEXT", "ST_GEOMFROMWKB", "ST_GEOMETRYFROMWKB", "GEOMFROMWKB",
    "ST_POINTFROMWKB", "ST_LINEFROMWKB", "ST_POLYFROMWKB", "ST_GEOMFROMGEOJSON",
    # JSON
    "JSON_ARRAY", "JSON_OBJECT", "JSON_QUOTE", "JSON_UNQUOTE", "JSON_EXTRACT", "JSON_VALUE",
    "JSON_QUERY", "JSON_SET", "JSON_INSERT", "JSON_REPLACE", "JSON_REMOVE", "JSON_MERGE",
    "JSON_MERGE_PATCH", "JSON_MERGE_PRESERVE", "JSON_COMPACT", "JSON_CONTAINS",
    "JSON_LENGTH", "JSON_TYPE", "JSON_VALID", "JSON_KEYS", "JSON_ARRAY_APPEND",
    "JSON_ARRAY_INSERT",
    # operators and keywords a parenthesis may follow: (a IN (1, 2)), CAST(… AS CHAR(3))
    "IN", "NOT", "AND", "OR", "XOR", "IS", "LIKE", "BETWEEN", "CASE", "WHEN", "THEN", "ELSE",
    "DIV", "REGEXP", "RLIKE", "AS", "ESCAPE", "COLLATE", "USING",
))
# words that read a sequence or the session with no parentheses after them
BARE = ("CURRENT_USER", "CURRENT_ROLE", "SESSION_USER", "SYSTEM_USER")


def own_definition(definition: list[Token]) -> list[Token]:
    """A column definition without an inline foreign key: its words before ``REFERENCES t
    (id) [ON DELETE SET DEFAULT …]``, which names a table (one called ``uuid`` too) and the
    referenced row's actions, not the column's default."""
    at = next((i for i, word in enumerate(definition) if word.is_word("REFERENCES")), None)
    return definition if at is None else definition[:at]


def default_expression(definition: list[Token]) -> list[Token]:
    """The tokens of a column definition's ``DEFAULT`` (none without one): a parenthesized
    expression, a function call, ``NEXT``/``PREVIOUS VALUE FOR s``, or one literal or word,
    signs before it included (an inline ``REFERENCES`` is not read: :func:`own_definition`)."""
    definition = own_definition(definition)
    at = next((i for i, word in enumerate(definition) if word.is_word("DEFAULT")), None)
    if at is None:
        return []
    end = at + 1
    while end < len(definition) and definition[end].kind == SYMBOL and \
            definition[end].text in "+-~!":
        end += 1
    if end >= len(definition):
        return definition[at + 1:]
    if definition[end].is_word("NEXT", "PREVIOUS"):
        return definition[at + 1:end + 4]  # NEXT VALUE FOR s
    if end + 1 < len(definition) and definition[end].kind in (WORD, NAME) and \
            definition[end + 1].text == "(":
        end += 1  # a function call: its name, then its arguments
    if definition[end].text != "(":
        return definition[at + 1:end + 1]
    depth = 0
    for close in range(end, len(definition)):
        depth += (definition[close].text == "(") - (definition[close].text == ")")
        if depth == 0 and definition[close].kind == SYMBOL:
            return definition[at + 1:close + 1]
    return definition[at + 1:]


def unrepeatable_default(definition: list[Token]) -> str | None:
    """What in a column definition's ``DEFAULT`` a replay would not make alike (``NEXTVAL()``,
    ``NEXT VALUE FOR``, ``CURRENT_USER``, ``DATABASE()``, …), as named; None when it is made
    only of literals, operators, column names and the functions of :data:`REPEATABLE`."""
    expression = default_expression(definition)
    for at, token in enumerate(expression):
        following = expression[at + 1].text if at + 1 < len(expression) else ""
        if token.is_word("NEXT", "PREVIOUS") and expression[at + 1:at + 2] and \
                expression[at + 1].is_word("VALUE"):
            return f"{token.text.upper()} VALUE FOR"
        if token.is_word(*BARE):
            return token.text.upper()
        if token.kind == SYMBOL and token.text == "@":
            return "a variable"  # @@hostname, @@server_id, @x
        if following == "(" and token.kind in (WORD, NAME) and not (
                token.kind == WORD and token.text.upper() in REPEATABLE):
            name = identifier(token) or token.text
            return f"{name.upper() if token.kind == WORD else name}()"
    return None
