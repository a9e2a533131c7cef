"""A model in a package of its own, for the torch.package report tests."""
