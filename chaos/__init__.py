"""streamchaos: fault injection for PySpark Structured Streaming.

The flow, one module each (Jepsen's parts in brackets):
  scenario (generator)  -> chaos.scenario, chaos.spec
  cluster  (db)         -> chaos.cluster, chaos.procs
  source / sinks        -> chaos.eventlog, chaos.source, chaos.sinks
  barriers (nemesis)    -> chaos.controller, chaos.nemesis, chaos.watcher
  driver   (client)     -> chaos.driver
  run                   -> chaos.trial  -> a stored run directory (history.jsonl, result.json)
  checker               -> properties/  (reads the run directory, never a process)
"""
