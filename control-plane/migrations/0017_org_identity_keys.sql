-- A member's chat identity is named by a key of its own, not by the app's ext_id: drawn when the
-- member is made and again when it is linked to another user, so that a new person behind an ext_id
-- never takes over the earlier one's identity, archive or offline messages (docs/orgs.md).
alter table org_members add column identity_key text;
update org_members set identity_key = substr(md5(id), 1, 10);
alter table org_members alter column identity_key set not null;
alter table org_members add constraint org_members_identity_key_check check (identity_key ~ '^[a-z0-9]{10}$');
create unique index org_members_identity_key_idx on org_members (org_id, identity_key);
