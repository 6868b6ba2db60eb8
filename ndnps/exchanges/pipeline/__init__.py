"""Pipeline-parallel training, sans-I/O (docs/hetero.md):

    schedule  the one-forward-one-backward (1F1B) order of a stage's work, a stage's state
              machine, the pipeline simulator (the planner's prediction)
    stage     one stage's work on a mini-batch: its layers driven in that order
"""
