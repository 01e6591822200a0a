"""A change subscription as a target (DRC's change-subscription service, Canal's
get/ack/rollback): a pipeline whose target is a source definition of ``type: subscription``
delivers its committed source transactions to an application over gRPC instead of writing a
database (docs/subscriptions.md).

- **Worker side** (:mod:`node.target.subscription.units`): a part's changes become protobuf
  ``Transaction`` s (``shared/rpc/subscription.proto``), each value typed as the source
  holds it, in the Spark worker that ran Extract/Transform. A subscription's parts are whole
  transactions in binlog order (:meth:`node.extract.job.Planner.parts`), so a batch's
  message is its parts' bytes one after the other: the node touches no change.
- **Load side** (:mod:`node.target.subscription.loader`): a batch goes into the
  pipeline's outbox (:mod:`node.target.subscription.outbox`), which holds at most
  ``parallelism`` batches its reader has not acknowledged (Load waits there: a slow reader
  slows its own subscription only); an acknowledgement moves the subscription's position
  (``pipelines/{pid}/acked`` in ZooKeeper, fenced by the owner's epoch), where a restart or
  another node resumes. Delivery is at least once; a change's id (its transaction's id and
  its index in it) is the same in every delivery.
"""
