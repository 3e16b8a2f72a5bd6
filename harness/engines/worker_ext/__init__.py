"""Code that runs inside inference servers, not in the trainer. This folder goes on the server's
PYTHONPATH as it is (its modules' names must not shadow any other package's), and its modules import
only torch and the standard library: the servers run in their own environments."""
