"""Time-division sharing of a forwarder's aggregators among jobs, sans-I/O (docs/sharing.md):

    decision   the share controller's decision rule (s1–s3) and its scores (CalcScore)
    agreement  the controller and a job's nodes agreeing on each round; a node's asker
"""
