"""Where in-network aggregation goes (the control plane of in-network aggregation at a few
forwarders; docs/placement.md): the network
(generated fat-tree and leaf-spine, or a Mini-NDN topology file), the linear program that gives
the aggregation throughput γ of a set of aggregating forwarders and the gradient routing plan,
and the greedy search for k of them with the baselines it is judged against.
`python -m ndnps.placement`. Pure computation: numpy and scipy's HiGHS, nothing else of ndnps."""
