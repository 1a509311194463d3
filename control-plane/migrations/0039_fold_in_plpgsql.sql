-- svc_fold in PL/pgSQL: the same folding, cheaper to call.
--
-- As a SQL function it is never inlined (unaccent is only stable), so each call ran its body through
-- the SQL-function executor. Search statements are planned for their values, and the planner folds
-- each svc_fold(query) of a statement on its own, setting that executor up each time: a profile search
-- names it thirteen times. PL/pgSQL keeps its compiled body for the session and evaluates a RETURN of
-- one expression directly. Measured on 20,000 profiles and 200,000 buzzes, the same 100 queries of four
-- kinds in alternating blocks (300 each): planning a profile search 1.37 -> 1.17 ms, a buzz search
-- 0.88 -> 0.80 ms; folding every buzz's text 1.6 -> 1.2 us a row (the bare expression: 1.1 us).
--
-- As before it folds in the database's collation, whatever the argument's: a PL/pgSQL body would take
-- the caller's (lower() of a "C.utf8" argument lowercases Greek and Cyrillic, the default "C" does not),
-- and the names' words and terms are in "C" (0036, 0037). Every name is qualified: a PL/pgSQL body is
-- resolved when it runs, in the caller's search path. Its body is not tracked as depending on unaccent,
-- so PostgreSQL would let that extension be dropped; every profile and buzz write would then fail.
create or replace function svc_fold(value text) returns text
  language plpgsql immutable parallel safe strict
  as $$
begin
  return pg_catalog.lower(public.unaccent('public.unaccent'::pg_catalog.regdictionary, value) collate "default");
end $$;
