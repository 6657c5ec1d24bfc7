"""The callbacks every Lightning part shares, by feature; src.training.trainer puts them in
the order they need: guards (NaN loss, STOP file, wall clock), alerts (a stalled metric, an
idle or full GPU), resume (exact resume after a kill), metrics (timing/, tracking/, batch/,
system/, lr, start-of-run facts), progress (the bar and the epoch lines), frozen_heap (a
faster step)."""
