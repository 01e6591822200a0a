"""The bad definition files of media and pairs (numbered and regular-expression patterns,
shards and fan-outs, columns and column groups, virtual columns, processors) and the exact
errors each must give: a part of :data:`tests.unit.bad_definitions.BAD`."""

from __future__ import annotations

import pytest

from tests.unit.yaml_cases import P, pairs

BAD_PAIRS = [
    pytest.param(
        pairs("- {source: 's.orders_[5-1]', target: s2.orders}\n"),
        f"f.yaml:11: {P}.pairs[0].source: invalid numbered pattern 'orders_[5-1]': "
        "range 5-1 is empty",
        id="multi-empty-range"),
    pytest.param(
        pairs("- {source: {namespace: s, table: 'orders_[a-b]'}, target: s2.orders}\n"),
        f"f.yaml:11: {P}.pairs[0].source.table: invalid numbered pattern 'orders_[a-b]': write "
        "it as prefix[LOW-HIGH]suffix, e.g. orders_[0-15] or orders_[00-15] for zero padding; "
        "a name that holds [ or ] goes in backticks, e.g. `t[1]`",
        id="multi-letters"),
    pytest.param(
        pairs("- {source: {namespace: s, table: 're:(ab'}, target: s2.t}\n"),
        f"f.yaml:11: {P}.pairs[0].source.table: invalid regular expression '(ab': missing ), "
        "unterminated subpattern at position 0",
        id="bad-regex"),
    pytest.param(
        pairs("- {source: {namespace: s, table: 're:t_\\d+'}, target: s2.t_x}\n"
              "- {source: s.u, target: {namespace: s2, table: 're:u_\\d+'}}\n"),
        f"f.yaml:12: {P}.pairs[1]: a target name cannot be a regular expression; name the table, "
        "a numbered family or a template of the source's names such as {schema} and ods_{table}",
        id="regex-target"),
    pytest.param(
        pairs("- {source: {namespace: s, table: 'x_{table}'}, target: s2.t}\n"),
        f"f.yaml:11: {P}.pairs[0]: a source name cannot be a template: {{schema}} and {{table}} "
        "stand for the source's names in target names",
        id="template-source"),
    pytest.param(
        pairs("- {source: {namespace: s, table: 're:.*'}, target: {namespace: s2, "
              "table: 'x_{name}'}}\n"),
        f"f.yaml:11: {P}.pairs[0].target.table: invalid template 'x_{{name}}': {{schema}} and "
        "{table} stand for the source's names, e.g. ods_{table}; a name that holds { or } goes "
        "in backticks",
        id="template-unknown-field"),
    pytest.param(
        pairs("- {source: 're:s.t'}\n"),
        [f"f.yaml:11: {P}.pairs[0].source: expected schema.table, got \"re:s.t\" (for a regular "
         "expression write {namespace: ..., table: 're:...'})",
         f"f.yaml:11: {P}.pairs[0].target: required field is missing"],
        id="regex-in-short-form-and-no-target"),
    pytest.param(
        pairs("- {source: orders, target: s2.orders}\n"),
        f"f.yaml:11: {P}.pairs[0].source: expected schema.table, got \"orders\"; a name that "
        "holds a dot goes in backticks, e.g. `my-db`.`t.1` (for a regular expression write "
        "{namespace: ..., table: 're:...'})",
        id="media-without-schema"),
    pytest.param(
        pairs("- {source: 's.orders_[0-3]', target: 's2.orders_[0-7]'}\n"),
        f"f.yaml:11: {P}.pairs[0]: target table orders_[0-7] has 8 names but source "
        "orders_[0-3] has 4; give a shard rule or matching ranges",
        id="multi-size-mismatch"),
    pytest.param(
        pairs("- {source: 's.orders', target: 's2.orders_[0-7]'}\n"),
        f"f.yaml:11: {P}.pairs[0]: target table orders_[0-7] has 8 names but source "
        "orders has 1; give a shard rule or matching ranges",
        id="single-to-multi-without-shard"),
    pytest.param(
        pairs("""\
            - source: s.orders
              target: s2.orders
              shard: {column: user_id}
            """),
        f"f.yaml:11: {P}.pairs[0]: a shard rule needs a numbered target, e.g. "
        "shop_[0-1].orders_[0-3]",
        id="shard-without-numbered-target"),
    pytest.param(
        pairs("""\
            - source: s.orders
              target: 's2.orders_[0-3]'
              shard: {column: user_id, algorithm: hash}
            """),
        f'f.yaml:13: {P}.pairs[0].shard.algorithm: expected one of modulo, quotient, got "hash"',
        id="shard-bad-algorithm"),
    pytest.param(
        pairs("""\
            - {source: s.t, target: s2.t, fan_out: true}
            - {source: s.t, target: s3.t}
            """),
        f"f.yaml:12: {P}.pairs[1]: pairs[0] already reads src:s.t; mark both 'fan_out: true' "
        "to split one source table into several targets",
        id="same-table-without-fan-out"),
    pytest.param(
        pairs("""\
            - {source: shop.orders, target: dw.orders_v2}
            - {source: {namespace: shop, table: 're:.*'},
               target: {namespace: lake, table: '{table}'}, fan_out: true}
            """),
        f"f.yaml:11: {P}.pairs[0]: pairs[1] (src:shop.re:.* → dst:lake.{{table}}) has fan_out "
        "and also reads src:shop.orders: a table fan-out pairs read goes to them only, so this "
        "pair would never write dst:dw.orders_v2; mark this pair 'fan_out: true' too to write "
        "both, or narrow pairs[1]'s pattern to leave src:shop.orders out",
        id="pair-a-fan-out-pattern-takes-away"),
    pytest.param(
        pairs("""\
            - {source: {namespace: 're:shop.*', table: 're:orders_.*'}, target: lake.all,
               fan_out: true}
            - {source: 'shop_[0-1].orders_[0-3]', target: 'dw_[0-1].orders_[0-3]'}
            """),
        f"f.yaml:13: {P}.pairs[1]: pairs[0] (src:re:shop.*.re:orders_.* → dst:lake.all) has "
        "fan_out and also reads src:shop_[0-1].orders_[0-3]: a table fan-out pairs read goes "
        "to them only, so this pair would never write dst:dw_[0-1].orders_[0-3]; mark this "
        "pair 'fan_out: true' too to write both, or narrow pairs[0]'s pattern to leave "
        "src:shop_[0-1].orders_[0-3] out",
        id="family-a-fan-out-pattern-takes-away"),
    pytest.param(
        pairs("""\
            - {source: {namespace: 're:shop.*', table: 're:orders_[01]'}, target: lake.all,
               fan_out: true}
            - {source: 'shop_[0-1].orders_[0-3]', target: 'dw_[0-1].orders_[0-3]'}
            """),
        f"f.yaml:13: {P}.pairs[1]: pairs[0] (src:re:shop.*.re:orders_[01] → dst:lake.all) has "
        "fan_out and also reads src:shop_[0-1].orders_[0-3] (shop_0.orders_0, shop_0.orders_1, "
        "shop_1.orders_0, shop_1.orders_1): a table fan-out pairs read goes to them only, so "
        "this pair would never write dst:dw_[0-1].orders_[0-3] for those; mark this pair "
        "'fan_out: true' too to write both, or narrow pairs[0]'s pattern to leave "
        "src:shop_[0-1].orders_[0-3] out",
        id="family-partly-taken-by-a-fan-out-pattern"),
    pytest.param(
        pairs("- {source: s.t, target: {datasource: src, namespace: s, table: t}}\n"),
        f"f.yaml:11: {P}.pairs[0]: the pair would copy src:s.t onto itself",
        id="copy-onto-itself"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              columns: {include: [a], exclude: [b]}
            """),
        f"f.yaml:13: {P}.pairs[0].columns: give either include or exclude, not both",
        id="include-and-exclude"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              columns: [a, b]
            """),
        f"f.yaml:13: {P}.pairs[0].columns: expected a mapping, got a list",
        id="columns-list-instead-of-include"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              key_columns: [id, id]
            """),
        f"f.yaml:13: {P}.pairs[0].key_columns: a column is listed twice",
        id="column-listed-twice"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              column_pairs:
                - {source: a, target: b}
                - {source: a, target: c}
            """),
        f"f.yaml:14: {P}.pairs[0].column_pairs: a source column is mapped twice",
        id="column-mapped-twice"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              column_pairs:
                - {source: a, target: x}
                - {source: b, target: X}
            """),
        f"f.yaml:14: {P}.pairs[0].column_pairs: two source columns are mapped to one target "
        "column (one value would overwrite the other in every row)",
        id="columns-mapped-to-one"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              columns: {include: [id, a, x]}
              column_pairs:
                - {source: a, target: x}
            """),
        f"f.yaml:13: {P}.pairs[0].columns: column x is included, and column_pairs maps a to "
        "that name too: one would overwrite the other in every row; map a to another name, "
        "or map or leave out x",
        id="column-renamed-onto-an-included-one"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              key_columns: [Code, name]
              columns: {exclude: [code, note]}
            """),
        f"f.yaml:14: {P}.pairs[0].columns: column(s) code are excluded, and key_columns name "
        "them: the columns a row is found by are always written to the target, so they "
        "cannot be left out; take them out of exclude, or key the pair by other columns",
        id="key-column-excluded"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              column_groups:
                - [street, city]
                - [zip]
            """),
        f"f.yaml:15: {P}.pairs[0].column_groups[1]: a column group needs at least two columns",
        id="column-group-of-one"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              column_groups: [street, city]
            """),
        [f'f.yaml:13: {P}.pairs[0].column_groups[0]: expected a list of column names, '
         'got "street"',
         f'f.yaml:13: {P}.pairs[0].column_groups[1]: expected a list of column names, '
         'got "city"'],
        id="column-group-not-a-list"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              virtual_columns:
                - {name: origin, value: primary, expression: "1 + 1"}
            """),
        f"f.yaml:14: {P}.pairs[0].virtual_columns[0]: give exactly one of value, expression "
        "or processor",
        id="virtual-column-two-fillers"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              virtual_columns:
                - {name: origin}
            """),
        f"f.yaml:14: {P}.pairs[0].virtual_columns[0]: give exactly one of value, expression "
        "or processor",
        id="virtual-column-no-filler"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              processor: not a callable
            """),
        f'f.yaml:13: {P}.pairs[0].processor: expected a Python callable as module:function, '
        'got "not a callable"',
        id="bad-processor"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              virtual_columns:
                - {name: total, expression: "price *"}
            """),
        f"f.yaml:14: {P}.pairs[0].virtual_columns[0].expression: invalid expression "
        "'price *': invalid syntax",
        id="bad-expression"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              virtual_columns:
                - {name: 'bad name', value: x}
            """),
        f"f.yaml:14: {P}.pairs[0].virtual_columns[0].name: invalid column name 'bad name'",
        id="bad-column-name"),
]
