"""The heterogeneous-cluster planner (heterogeneous pipeline + data-parallel planning, after
PipeDream: Narayanan et al., SOSP 2019, and HetPipe: Park et al., USENIX ATC 2020;
docs/hetero.md): pipeline stages sized by device speed, ordered by each device's communication
ratio (speed ÷ its synchronisation cost), the layers split by an integer program over a profile
of the model. Computation only (numpy, scipy's HiGHS; the model from
ndnps.ml, the 1F1B schedule from ndnps.exchanges.pipeline.schedule)."""
