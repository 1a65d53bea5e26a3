"""What can be measured: collectives, and each MPI's algorithms for them."""
