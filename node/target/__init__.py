"""Targets: what a database or store must do to take a pipeline's changes.

A kind of target has two sides:

- **the worker side** (:mod:`node.target.renderers`), run in the Spark worker that ran
  Extract/Transform: a part's target changes merged per key and turned into the target's own
  form (:class:`node.jobs.Unit`; for MySQL/MariaDB, statement texts);
- **the load side** (:mod:`node.target.kinds`), one loader per running pipeline in the node
  (:class:`node.target.base.TargetLoader`): it knows the target's tables (shipped with each
  job: :class:`node.target.base.TargetTables`), fences older owners and reads back where
  the target stands at start (``claim``), applies a batch *with its position* atomically
  (``load_units``; ``load`` for a DDL or a two-way batch), and takes DDL.

MySQL/MariaDB (:mod:`node.target.mysql`) is the first kind: the position row is
``retl.retl_position``, written in the same transaction as the batch's rows. A target's
modules never import Extract (:mod:`node.extract`), and Extract imports only the worker side
of a target (import-linter contracts in setup.cfg).
"""
