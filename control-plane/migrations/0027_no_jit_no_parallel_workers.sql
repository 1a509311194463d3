-- The service's own sessions plan for short statements answered at once, never for long ones.
--
-- A statement the planner costs high (a search branch that runs only for a rare word, costed for a
-- common one, or a word it cannot estimate) got JIT-compiled, 28 ms of LLVM for a statement that runs
-- in 1, or a parallel plan whose workers took 40-60 ms to start on a busy machine. Both pay off only
-- for statements that run for seconds, which the control plane does not send; and workers take cores
-- from the calls running beside them. Set for the role the migrations run as (the control plane's),
-- in every database, for its new sessions; an operator may set them otherwise with ALTER ROLE.
alter role current_user set jit = off;
alter role current_user set max_parallel_workers_per_gather = 0;
