"""The experiment runner. It starts the forwarder as a program and reads its configuration
types; nothing below imports it. Its modules:

    scenario   the whole run: a scenario file in, processes started and watched, the report out
    spec       the scenario file and its overrides (`--set`), checked
    topology   where each process runs and how the forwarders are joined; their configuration
    fabric     data-centre fabrics (fat-tree, BCube) from ndnps.placement's networks
    minindn    a Mini-NDN topology file as a scenario's topology
    netns      network namespaces joined by veths, with rate-limited links
    process    child processes: start, wait until ready, stop, show log tails
    reaper     what a run leaves in the kernel and the temp dir goes when the run goes
    metrics    the apps' metrics as JSON lines
    report     the run's summary, plots and timeline
    exitcodes  the programs' exit codes
    baseline   the plain TCP parameter server, run in place of ndnps (`run.system = "tcp"`)
    demo       one Interest/Data exchange through a forwarder (`python -m ndnps.demo`)
    ina        `[ina]`: in-network aggregation placed on the scenario's topology
    share      `[share]`: several jobs sharing one aggregating forwarder, its controller
    peers      a PS-less run's `collective` summary
    pipeline   `[[device_kinds]]`, `[pipeline]`: the plan made before a pipeline run, its summary
"""
