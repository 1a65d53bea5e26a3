"""Built-in MPI mini-applications (ring, matrix, jacobi: C sources) and their models."""
