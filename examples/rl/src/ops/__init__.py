"""Running on a shared machine: the GPU lock, freeing memory, hardware readings, the babysitter, records."""
