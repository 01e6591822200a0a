"""Generated gRPC and protobuf code (`make proto` from proto/; CI checks it is current)."""
