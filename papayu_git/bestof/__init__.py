"""Best of N: several plans for one pinned tip, checked side by side, the best one lands
(docs/DESIGN.md, "Best of N").

One room per part: `sampling` decides who is asked how (model, temperature, approach), `asking`
asks them in threads under a token budget and a deadline, `checking` turns each answer into a
tree (identical trees are checked once) and checks it in a child process (`child`: one
transaction, kept on `papayu/<run>/<i>`), `ranking` orders the results and says why each lost,
`judge` may break a tie between green ones, `matrix` reads each candidate's result and draws the
table, `session` runs the asking and the checking, `decide` ranks and lands, `runs` keeps the run's
score matrix and its refs (`show`, `land` and `drop` of a run are those commands'). Nothing here
decides whether a plan passes: that is the gate's verdict as the transaction reports it.
"""
