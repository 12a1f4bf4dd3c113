"""streamchaos: fault injection for PySpark Structured Streaming.

The flow, one module each (Jepsen's parts in brackets):
  scenario (generator)  -> chaos.scenario, chaos.spec, chaos.schedule
  harness  (db)         -> chaos.harness, chaos.cluster, chaos.nodes, chaos.procs
  source / sinks        -> chaos.eventlog, chaos.source, chaos.sinks
  barriers (nemesis)    -> chaos.controller, chaos.nemesis, chaos.watcher
  driver   (client)     -> chaos.driver, chaos.standby, chaos.spares
  run                   -> chaos.trial  -> a stored run directory (history.jsonl, result.json)
  checker               -> properties/ through chaos.judge (reads the run directory, never a process)
  campaign              -> chaos.campaign (stored), chaos.runner (runs it)
"""
