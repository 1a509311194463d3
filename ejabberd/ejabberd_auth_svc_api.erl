%%% ejabberd_auth_svc_api: the credentials of ejabberd's HTTP API callers (auth_method svc_api).
%%%
%%% mod_http_api checks an `Authorization: Basic <user@host:password>` header with
%%% ejabberd_auth:check_password, which asks every auth method in turn. Listed first, this one answers
%%% for the API accounts in process, so an API call never waits on the control plane's answer, and says
%%% nothing about any other user (ejabberd_auth_svc_control_plane asks about those); for them it notes
%%% when the check began (mod_svc_scope closes a login that raced a revocation).
%%%
%%% The accounts come from the environment at start, as user=sha256hex pairs:
%%%   SVC_EJABBERD_API_ACCOUNTS="svc-api=<sha256 of its secret>,svc-operator=<...>"
%%% Only digests are held; a password is hashed and compared in constant time. ejabberd.yml keeps
%%% these accounts off c2s and gives each one its commands (api_permissions).
%%%
%%% Built next to mod_svc_scope (infra/src/servers/ejabberd.ts, infra/ejabberd.Dockerfile).
-module(ejabberd_auth_svc_api).
-behaviour(ejabberd_auth).

-export([start/1, stop/1, plain_password_required/1, store_type/1, check_password/4,
         user_exists/2, use_cache/1]).

-include("logger.hrl").

-define(ACCOUNTS_VARIABLE, "SVC_EJABBERD_API_ACCOUNTS").

start(_Host) ->
    Accounts = parse_accounts(os:getenv(?ACCOUNTS_VARIABLE, "")),
    case maps:size(Accounts) of
        0 -> ?WARNING_MSG("~ts is empty: no HTTP API account can sign in", [?ACCOUNTS_VARIABLE]);
        _ -> ok
    end,
    persistent_term:put(?MODULE, Accounts).

stop(_Host) ->
    ok.

plain_password_required(_) -> true.

store_type(_) -> external.

%% Never cached: nothing to look up that is slower than the cache.
use_cache(_) -> false.

check_password(User, _AuthzId, _Server, Password) ->
    case maps:find(User, persistent_term:get(?MODULE, #{})) of
        %% An API account with the wrong password stops here: no other method may accept it.
        {ok, Digest} -> {nocache, {stop, crypto:hash_equals(Digest, crypto:hash(sha256, Password))}};
        %% A chat user's login: noted for mod_svc_scope before the next auth method asks the control plane.
        error -> mod_svc_scope:password_checked(User), {nocache, false}
    end.

%% Not a user of the chat: an API account has no roster, no presence and no login (c2s denies it).
user_exists(_User, _Server) ->
    {nocache, false}.

parse_accounts(Text) ->
    maps:from_list(
      [{list_to_binary(User), binary:decode_hex(list_to_binary(Hex))}
       || Pair <- string:lexemes(Text, ","),
          [User, Hex] <- [string:split(string:trim(Pair), "=")],
          length(Hex) =:= 64]).
