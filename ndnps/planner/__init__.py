"""The heterogeneous-cluster planner (issue 27; the `004_…` method): pipeline stages sized by
device speed, ordered by the method's communication ratio, the layers split by an integer
program over a profile of the model. Computation only (numpy, scipy's HiGHS; the model from
ndnps.ml, the 1F1B schedule from ndnps.exchanges.pipeline)."""
