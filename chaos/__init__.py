"""streamchaos: fault injection for PySpark Structured Streaming.

The flow, one module each (Jepsen's parts in brackets):
  scenario (generator)  -> chaos.scenario.scenario, chaos.scenario.faults, chaos.run.admission
  harness  (db)         -> chaos.run.harness, chaos.clusters.standalone, chaos.clusters.docker.nodes,
  chaos.machine.processes
  source / sinks        -> chaos.stream.eventlog, chaos.stream.source, chaos.stream.sinks
  barriers (nemesis)    -> chaos.nemesis.controller, chaos.nemesis.actions, chaos.run.watcher
  driver   (client)     -> chaos.driver.process, chaos.run.standby, chaos.driver.booted_ahead
  run                   -> chaos.run.trial  -> a stored run directory (history.jsonl, result.json)
  checker               -> properties/ through chaos.run.judge (reads the run directory, never a process)
  campaign              -> chaos.campaign.stored (stored), chaos.campaign.runner (runs it)
"""
