-- Rows written while their account is being charged no longer reference the account row itself.
--
-- Every charge updates its account's row (the balance), and a foreign key check takes a KEY SHARE lock
-- on the row it names. Locks of concurrent inserts beside the charge's own make the row's locker a
-- MultiXact, which every later check and the next charge must read back, and every lookup of the row
-- walks its chain of updated versions: a quarter of PostgreSQL's CPU on a priced upload of one busy
-- account (bench/core.ts). These rows keep their foreign key to the app, whose account never changes
-- (apps.account_id references accounts), and their account_id is written from the same key as their
-- app_id: the account is the app's.
alter table storage_objects drop constraint if exists storage_objects_account_id_fkey;
alter table media drop constraint if exists media_account_id_fkey;
alter table live_sessions drop constraint if exists live_sessions_account_id_fkey;
