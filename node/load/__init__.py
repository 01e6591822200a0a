"""Load: the serial apply loop over a pipeline's target (:mod:`node.load.loop`). What a target
does with a batch — its statements or commits, and its position with them — is the
target's own (:mod:`node.target`)."""
