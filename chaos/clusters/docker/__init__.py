"""Docker nodes (``--cluster docker``): the node image, the containers, the cluster, its database node."""
