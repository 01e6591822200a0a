"""The table of bad definition files and the exact errors each must give (those of media
and pairs in bad_pairs.py)."""

from __future__ import annotations

import pytest

from tests.unit.bad_pairs import BAD_PAIRS
from tests.unit.yaml_cases import SOURCES, P, channel, pairs

BAD = [
    pytest.param(
        "sources:\n  - name: a\n    host: [db1\n",
        'f.yaml:4: not valid YAML: expected \',\' or \']\', but got \'<stream end>\'',
        id="yaml-syntax-unclosed-bracket"),
    pytest.param(
        "sources:\n  - name: a\n\thost: db1\n",
        "f.yaml:3: not valid YAML: found character '\\t' that cannot start any token",
        id="yaml-syntax-tab"),
    pytest.param(
        "sources:\n  - name: a\n    host: db\x07\n",
        "f.yaml:3: not valid YAML: character #x0007 is not allowed; remove it",
        id="yaml-control-character"),
    pytest.param(
        "", "f.yaml: the file is empty; expected 'sources:' and/or 'channels:'",
        id="empty-file"),
    pytest.param(
        "# only a comment\n\n",
        "f.yaml: the file is empty; expected 'sources:' and/or 'channels:'",
        id="comments-only"),
    pytest.param(
        "- name: a\n  host: db1\n", "f.yaml:1: expected a mapping, got a list",
        id="top-level-list"),
    pytest.param(
        "hello\n", 'f.yaml:1: expected a mapping, got "hello"', id="top-level-scalar"),
    pytest.param(
        "{}\n", "f.yaml:1: nothing defined: expected 'sources:' and/or 'channels:'",
        id="top-level-empty-mapping"),
    pytest.param(
        SOURCES + "chanels: []\n", "f.yaml:4: chanels: unknown key; did you mean 'channels'?",
        id="unknown-top-level-key"),
    pytest.param(
        "sources:\n  - name: a\n    host: db1\n    prot: 3306\n",
        "f.yaml:4: sources[0].prot: unknown key; did you mean 'port'?",
        id="unknown-key-did-you-mean"),
    pytest.param(
        "sources:\n  - name: a\n    hosts: [db1:3306, 'db2:x']\n",
        "f.yaml:3: sources[0].hosts[1]: 'db2:x': the port must be between 1 and 65535",
        id="replica-set-bad-member"),
    pytest.param(
        "sources:\n  - name: a\n    host: db0\n    hosts: [db1, db2]\n",
        "f.yaml:4: sources[0].hosts: give either 'host' (and 'port') or 'hosts' (a replica "
        "set's members, host:port each), not both",
        id="replica-set-and-host"),
    pytest.param(
        "sources:\n  - name: a\n    hosts: [db1, 'db1:3306']\n    primary: first\n",
        ["f.yaml:3: sources[0].hosts[1]: db1:3306 is named twice",
         "f.yaml:4: sources[0].primary: expected one of read_only, order, got \"first\""],
        id="replica-set-twice-and-bad-finder"),
    pytest.param(
        "sources:\n  - name: a\n    host: db1\n    colour: red\n",
        "f.yaml:4: sources[0].colour: unknown key; known keys: charset, host, hosts, name, "
        "password, port, primary, switch_after_s, tls, type, user",
        id="unknown-key-known-keys"),
    pytest.param(
        "sources:\n  - name: a\n    host: db1\n    host: db2\n",
        "f.yaml:4: sources[0].host: duplicate key", id="duplicate-key"),
    pytest.param(
        "sources:\n  - name: a\n    host: db1\n    port: five\n",
        'f.yaml:4: sources[0].port: expected an integer from 1 to 65535, got "five"',
        id="string-where-int"),
    pytest.param(
        channel("        parallelism: five\n"),
        f'f.yaml:10: {P}.parallelism: expected an integer from 1 to 64, got "five"',
        id="parallelism-five"),
    pytest.param(
        channel("        batch_size: true\n"),
        f'f.yaml:10: {P}.batch_size: expected a positive integer, got "true"',
        id="bool-where-int"),
    pytest.param(
        channel("        ddl_sync: maybe\n"),
        f'f.yaml:10: {P}.ddl_sync: expected true or false, got "maybe"', id="bad-boolean"),
    pytest.param(
        "sources:\n  - [a, db1]\n", "f.yaml:2: sources[0]: expected a mapping, got a list",
        id="list-where-mapping"),
    pytest.param(
        "sources: {name: a, host: db1}\n", "f.yaml:1: sources: expected a list, got a mapping",
        id="mapping-where-list"),
    pytest.param(
        "sources:\n  - name: a\n    host: db1\n    port: 99999\n",
        'f.yaml:4: sources[0].port: expected an integer from 1 to 65535, got "99999"',
        id="port-out-of-range"),
    pytest.param(
        channel("        parallelism: 0\n"),
        f'f.yaml:10: {P}.parallelism: expected an integer from 1 to 64, got "0"',
        id="parallelism-zero"),
    pytest.param(
        channel("        free_door: {source: nowhere, slice: 0}\n"),
        [f"f.yaml:10: {P}.free_door.source: unknown source 'nowhere' (known: dst, src); "
         "define it under 'sources:'",
         f'f.yaml:10: {P}.free_door.slice: expected an integer from 1 to 1000000, got "0"'],
        id="free-door-bad"),
    pytest.param(
        channel("        max_retries: -1\n"),
        f'f.yaml:10: {P}.max_retries: expected a non-negative integer, got "-1"',
        id="max-retries-negative"),
    pytest.param(
        channel("        nodes: [1, 0]\n"),
        f'f.yaml:10: {P}.nodes[1]: expected a positive integer, got "0"',
        id="node-id-zero"),
    pytest.param(
        channel("        load_nodes: [3]\n"),
        f"f.yaml:10: {P}.load_nodes: setl has no separate Select and Load nodes: one node "
        "owns a pipeline and runs all its stages (Spark spreads Extract/Transform over its "
        "workers); list the nodes that may own it as nodes: [..]",
        id="otter-load-nodes"),
    pytest.param(
        "sources:\n  - name: a\n    port: 3306\n",
        "f.yaml:2: sources[0].host: required field is missing", id="missing-host"),
    pytest.param(
        "sources:\n  - name: a\n    host:\n",
        "f.yaml:2: sources[0].host: required field is missing", id="null-host-is-missing"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n",
        "f.yaml:5: channels[0].pipelines: required field is missing", id="missing-pipelines"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines:\n      - {name: p, source: src, "
        "target: dst}\n",
        "f.yaml:7: channels[0].pipelines[0].pairs: required field is missing",
        id="missing-pairs"),
    pytest.param(
        channel("", "          []\n"),
        f"f.yaml:11: {P}.pairs: a pipeline needs at least one pair (source table → target table)",
        id="empty-pairs"),
    pytest.param(
        "sources:\n  - {name: Shop, host: db1}\n",
        "f.yaml:2: sources[0].name: invalid name 'Shop': start with a lower-case letter, then "
        "lower-case letters, digits, '_' or '-' (at most 63)",
        id="bad-name"),
    pytest.param(
        "sources:\n  - {name: a, host: db1, type: postgres}\n",
        'f.yaml:2: sources[0].type: expected one of mysql, mariadb, delta, subscription, '
        'got "postgres"',
        id="bad-source-type"),
    pytest.param(
        "sources:\n  - {name: a, type: delta, location: lake, "
        "storage: {AWS_SECRET_ACCESS_KEY: s3cr3t}}\n",
        ["f.yaml:2: sources[0].location: location 'lake' is neither an absolute directory nor "
         "an object-store URL (s3://, s3a://, gs://, az://, abfs://, abfss://, file://); write "
         "/var/lib/lake or s3://bucket/path",
         "f.yaml:2: sources[0].storage.AWS_SECRET_ACCESS_KEY: AWS_SECRET_ACCESS_KEY is a "
         "credential: write a reference, ${SETL_NAME} (an environment variable) or file:/path "
         "(a file holding it), never the value itself"],
        id="bad-lake"),
    pytest.param(
        "sources:\n  - {name: a, type: delta, location: 'gs://b/x'}\n",
        "f.yaml:2: sources[0].location: lake location gs://b/x: this version writes lakes in "
        "local directories (an absolute path) and in S3 or an S3-compatible store "
        "(s3://bucket/path, with AWS_ENDPOINT_URL for MinIO, Ceph, R2…); use one of them",
        id="lake-store-not-written"),
    pytest.param(
        "sources:\n  - {name: a, host: db1}\n  - {name: b, host: db2}\n  - {name: a, host: db3}\n",
        "f.yaml:4: sources[2]: duplicate source name 'a'", id="duplicate-source"),
    pytest.param(
        SOURCES + "channels:\n"
        "  - {name: c, pipelines: [{name: p, source: src, target: dst, pairs: [{source: s.t, "
        "target: s2.t}]}]}\n"
        "  - {name: c, pipelines: [{name: p, source: src, target: dst, pairs: [{source: s.t, "
        "target: s2.t}]}]}\n",
        "f.yaml:6: channels[1]: duplicate channel name 'c'", id="duplicate-channel"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines:\n"
        "      - {name: p, source: src, target: dst, pairs: [{source: s.t, target: s2.t}]}\n"
        "      - {name: p, source: dst, target: src, pairs: [{source: s2.t, target: s.t}]}\n",
        "f.yaml:8: channels[0].pipelines[1]: duplicate pipeline name 'p'",
        id="duplicate-pipeline"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines:\n      - name: p\n"
        "        source: nowhere\n        target: dst\n        pairs: [{source: s.t, "
        "target: s2.t}]\n",
        f"f.yaml:8: {P}.source: unknown source 'nowhere' (known: dst, src); "
        "define it under 'sources:'",
        id="dangling-pipeline-source"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines:\n      - name: p\n"
        "        source: src\n        target: nowhere\n        pairs: [{source: s.t, "
        "target: s2.t}]\n",
        f"f.yaml:9: {P}.target: unknown source 'nowhere' (known: dst, src); "
        "define it under 'sources:'",
        id="dangling-pipeline-target"),
    pytest.param(
        "channels:\n  - name: c\n    pipelines:\n      - name: p\n"
        "        source: src\n        target: dst\n        pairs: [{source: s.t, "
        "target: s2.t}]\n",
        ["f.yaml:5: channels[0].pipelines[0].source: unknown source 'src' (known: none "
         "defined); define it under 'sources:'",
         "f.yaml:6: channels[0].pipelines[0].target: unknown source 'dst' (known: none "
         "defined); define it under 'sources:'"],
        id="dangling-no-sources-at-all"),
    pytest.param(
        pairs("""\
            - source: {datasource: elsewhere, namespace: s, table: t}
              target: s2.t
            """),
        f"f.yaml:11: {P}.pairs[0].source.datasource: unknown source 'elsewhere' (known: dst, "
        "src); define it under 'sources:'",
        id="dangling-media-datasource"),
    pytest.param(
        "sources:\n  - name: a\n    host: db1\n    password: hunter2\n",
        "f.yaml:4: sources[0].password: passwords are references, not values: write ${ENV_VAR} "
        "or file:/path/to/file",
        id="plain-text-password"),
    pytest.param(
        "sources:\n  - {name: a, host: db1, password: 'file:'}\n",
        "f.yaml:2: sources[0].password: passwords are references, not values: write ${ENV_VAR} "
        "or file:/path/to/file",
        id="password-file-without-path"),
    *BAD_PAIRS,  # media and pairs: bad_pairs.py
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines:\n"
        "      - {name: p, source: src, target: dst, pairs: [{source: s.t, target: s2.t}]}\n"
        "      - {name: q, source: src, target: dst, pairs: [{source: s.u, target: s2.u}]}\n",
        "f.yaml:7: channels[0].pipelines: the two pipelines of a two-way channel must run in "
        "opposite directions (got src->dst and src->dst)",
        id="two-way-not-opposite"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines:\n"
        "      - {name: p, source: src, target: dst, pairs: [{source: s.t, target: s.t}],\n"
        "         free_door: {source: src}}\n"
        "      - {name: q, source: dst, target: src, pairs: [{source: s.t, target: s.t}]}\n",
        "f.yaml:7: channels[0].pipelines: free_door on a two-way channel: it takes no free-door "
        "request (rows read from the tables): a copy into one side of a two-way channel cannot "
        "tell the rows it read from that side's own newer writes that have not come over yet, "
        "and would write the older rows over them. Copy with a one-way channel while the other "
        "side takes no writes, then start the two-way channel at the copy's end (setl "
        "position set)",
        id="two-way-free-door"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines:\n"
        "      - {name: p, source: src, target: dst, pairs: [{source: s.t, target: s2.t}]}\n"
        "      - {name: q, source: dst, target: src, pairs: [{source: s2.t, target: s.t}]}\n"
        "      - {name: r, source: src, target: dst, pairs: [{source: s.u, target: s2.u}]}\n",
        "f.yaml:7: channels[0].pipelines: 3 pipelines given; a channel has one pipeline "
        "(one-way) or two (two-way)",
        id="three-pipelines"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines: []\n",
        "f.yaml:6: channels[0].pipelines: 0 pipelines given; a channel has one pipeline "
        "(one-way) or two (two-way)",
        id="no-pipelines"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines: forward\n",
        'f.yaml:6: channels[0].pipelines: expected a list, got "forward"',
        id="pipelines-scalar"),
    pytest.param(
        channel("        start: {file: binlog.000003, pos: 4, gtid: '0-1-100'}\n"),
        f"f.yaml:10: {P}.start: give either file/pos or gtid, not both",
        id="start-file-and-gtid"),
    pytest.param(
        channel("        start: {gtid: '0-1-100', pos: 4}\n"),
        f"f.yaml:10: {P}.start: give either file/pos or gtid, not both",
        id="start-pos-and-gtid"),
    pytest.param(
        channel("        start: {pos: 120}\n"),
        f"f.yaml:10: {P}.start: expected 'latest', {{file: ..., pos: ...}} or {{gtid: ...}}",
        id="start-pos-without-file"),
    pytest.param(
        channel("        start: {file: binlog.000003, pos: 3}\n"),
        f'f.yaml:10: {P}.start.pos: expected an integer of at least 4, got "3"',
        id="start-pos-below-4"),
    pytest.param(
        channel("        start: earliest\n"),
        f'f.yaml:10: {P}.start: expected one of latest, snapshot, got "earliest"',
        id="start-unknown-word"),
    pytest.param(
        "sources:\n  - name: a\n    host: db1\n    charset: utf8\n",
        "f.yaml:4: sources[0].charset: charset utf8: setl reads and writes text as utf8mb4 "
        "(the rows it reads for copies through a utf8 connection would lose the characters "
        "utf8 lacks, as '?'); leave charset out or give utf8mb4",
        id="charset-not-utf8mb4"),
    pytest.param(
        "sources:\n  - name: a\n    host: db1\n    charset: [utf8]\n",
        "f.yaml:4: sources[0].charset: expected a non-empty string, got a list",
        id="list-where-string"),
    pytest.param(
        "sources:\n  - {name: a, host: ''}\n",
        'f.yaml:2: sources[0].host: expected a non-empty string, got ""',
        id="empty-string"),
]
