"""Hosts over SSH (``--cluster ssh:FILE``): the hosts' file, the client, checks, shipping, processes, databases."""
