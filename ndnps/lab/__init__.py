"""The experiment runner: a scenario file and its overrides (spec), the forwarders' topology
and configuration (topology), processes started, watched and stopped (process), network
namespaces with rate-limited veths (netns), the apps' metrics (metrics), the run's report,
plots and timeline (report), exit codes (exitcodes) and the whole run (scenario). It starts
the forwarder as a program and reads its configuration types; nothing below imports it."""
