"""``setl verify`` and ``--repair`` on the node (issue 14): are a pipeline's targets equal to
its source, through the pipeline's own mappings?

- :mod:`node.verify.plan` — which tables, target tables and columns, and how to compare;
- :mod:`node.extract.chunks` — the tables split into key ranges (shared with the snapshot);
- :mod:`node.verify.task` — a chunk checked in a Spark task: both sides in consistent
  snapshots, hashed, only differing keys back (:mod:`node.verify.readers`,
  :mod:`node.verify.values`);
- :mod:`node.verify.settle` — differing keys re-checked after the pipeline loaded past the
  source's read: no false difference from rows in flight;
- :mod:`node.verify.repair` — confirmed keys sent through the free door;
- :mod:`node.verify.run` — one pipeline's run, :mod:`node.verify.report` — what it found;
  :mod:`node.verify.rpc` — its gRPC stream.
"""
