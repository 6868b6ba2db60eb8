"""The experiment runner. It starts the forwarder as a program and reads its configuration
types; nothing below imports it. Its modules:

    scenario   `python -m ndnps.scenario`: the command line
    runner     the whole run: processes started on the planned topology, the report written
    supervision  the children watched; what an unplanned exit does
    faults     [faults]: read, and its kills and restarts during a run
    progress   the live progress and the final table
    spec       the scenario file and its overrides (`--set`), checked
    config     a scenario as parsed; values: a value checked, the shared constants
    feature    what a synchronisation method is to the lab; features: the table of them
    pipeline, baseline, share, peers, ina, jobs   one module per method (its Feature)
    topology   where each process runs and how the forwarders are joined; nodes: the plan's parts
    fabric     data-centre fabrics (fat-tree, leaf-spine, BCube) from ndnps.placement's networks
    minindn    a Mini-NDN topology file as a scenario's topology
    netns      network namespaces joined by veths; namespaces: a --netns run's hosts and links
    bottleneck the bottleneck's tbf, counters, summary and rows
    process    child processes: start, wait until ready, stop, show log tails
    reaper     what a run leaves in the kernel and the temp dir goes when the run goes
    status     the forwarders' status: faces labelled by app
    metrics    the apps' metrics as JSON lines
    report     summary.json; series, traces, marks: what it reads; plots, figures, timeline
    profiling  the model profiled on this machine (a pipeline's plan, emulated devices)
    tomltext   TOML as the runner writes it
    exitcodes  the programs' exit codes, the runner's failures
    demo       one Interest/Data exchange through a forwarder (`python -m ndnps.demo`)
"""
