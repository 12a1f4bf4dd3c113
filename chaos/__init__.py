"""streamchaos: fault injection for PySpark Structured Streaming.

The folders, lowest first (docs/architecture.md): store, machine, scenario, clusters, nemesis, stream, jobs,
driver, run, campaign, cli; each imports only from those before it. The checker is ``properties/``, reached
through ``chaos.run.judge``: it reads the run directory, never a process.
"""
