"""Machine learning without the network: numpy models and optimizers (models), the bundled
datasets with their shards and batch order (data), and the single-process reference trainer
the distributed runs must match bit for bit (train)."""
