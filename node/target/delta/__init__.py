"""Delta Lake as a target (through delta-rs: no JVM, no jars).

A lake target (a source definition of ``type: delta``) holds a Delta table per target
``schema.table`` under its ``location`` (:func:`shared.lakes.table_uri`). Each pair's table
is kept in one of two modes:

- ``mirror`` (the default): the source's current rows. A batch's changes are merged per key
  in the Spark worker (the last image of each key, or its delete) and applied with one
  ``MERGE`` per table. A keyless table cannot be mirrored (a MERGE cannot remove one of two
  equal rows): it is refused with the reason.
- ``changelog``: every change appended in source order with its operation, before image,
  source position, GTID, commit time, the source transaction's id and its order in it.

**Exactly once.** Every commit setl makes to a table carries, in the same Delta commit, the
position of the batch it holds (commit metadata ``setl.*``) and an application transaction
(``setl:<pipeline>``, version = the batch's processId), as Spark Structured Streaming's
idempotent writes do. A table is the unit of atomicity: at start each table's position is
read back and is a cut (:mod:`node.cursor`), so a batch is written again only to the tables
that lack it. A new owner fences every table with an empty commit of its epoch (a table's
making carries its maker's epoch). Every commit is checked against the table's newest stamp
on the version it is made on (:func:`node.target.delta.commits.commit`): a newer epoch
stops the writer, a position at or past the batch's end skips the batch, and one inside
the batches written (a table an older owner made and wrote after the claim, so Select did
not cut there) stops the load: its retry claims the table, fencing that owner.

Worker side: :mod:`node.target.delta.units` (changes → Arrow IPC bytes). Load side:
:mod:`node.target.delta.loader` (its appends and MERGEs: :mod:`node.target.delta.writes`).
Types: :mod:`node.target.delta.columns`.
"""
