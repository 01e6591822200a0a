"""setl-node: Select, Extract/Transform on Spark and Load for the pipelines it runs."""

import os

from node import compiled

compiled.install()  # the stream path's compiled modules, or their pure twins (node.compiled)

# gRPC C-core would log a line each time Spark forks a worker while our server runs.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
