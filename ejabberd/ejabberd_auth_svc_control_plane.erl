%%% ejabberd_auth_svc_control_plane: every chat login is the control plane's decision (auth_method
%%% svc_control_plane, after svc_api). A password check or an account check is one POST to the control
%%% plane's internal listener (/internal/ejabberd/auth, the address and secret svc_control_plane holds),
%%% made by the process that asks: a login waits for its own answer only.
%%%
%%% In place of external auth (extauth_program): ejabberd 23.01 gives each external-auth program one
%%% question at a time and picks one in turn whether busy or not, so a login waited behind another's
%%% answer; and each program was a Node process of its own, rarely warm (docs/decisions.md).
%%%
%%% Anything but a 200 {"ok": true|false} within 5 s is a refusal: an unreachable control plane lets no
%%% login in, and logins work again as soon as it answers. An outage is logged as it starts and as it
%%% ends, not per login; never a password.
%%%
%%% Built by the stack runner (infra/src/servers/ejabberd.ts) and infra/ejabberd.Dockerfile.
-module(ejabberd_auth_svc_control_plane).
-behaviour(ejabberd_auth).

-export([start/1, stop/1, plain_password_required/1, store_type/1, check_password/4,
         user_exists/2, use_cache/1]).

-include("logger.hrl").

-define(HTTP_PROFILE, svc_auth).
-define(PATH, "/internal/ejabberd/auth").
%% Far below ejabberd's own limits: a hung control plane costs one login, never a c2s process's life.
-define(TIMEOUT_MS, 5000).
%% Kept-alive connections to the control plane: one per login answered at once.
-define(MAX_SESSIONS, 32).
-define(OUTAGE, {?MODULE, outage}).

start(_Host) ->
    %% Whether the control plane is failing (1) or answering (0): swapped atomically, so that each
    %% change is logged once, and never a persistent_term write (a VM-wide scan) per login.
    case persistent_term:get(?OUTAGE, undefined) of
        undefined -> persistent_term:put(?OUTAGE, atomics:new(1, []));
        _ -> ok
    end,
    svc_control_plane:start_profile(?HTTP_PROFILE, ?MAX_SESSIONS).

stop(_Host) ->
    ok.

plain_password_required(_) -> true.

store_type(_) -> external.

%% Never cached: a revoked credential must stop working at the next login.
use_cache(_) -> false.

check_password(User, AuthzId, _Server, _Password) when AuthzId /= <<>>, AuthzId /= User ->
    {nocache, false};
check_password(_User, _AuthzId, _Server, <<>>) ->
    {nocache, false};
check_password(User, _AuthzId, Server, Password) ->
    %% SASL PLAIN passes the client's bytes on as they came: what is not UTF-8 is no credential of
    %% ours, and JSON could not carry it.
    case unicode:characters_to_binary(Password) of
        Password ->
            case ask(#{op => auth, user => User, server => Server, password => Password}) of
                {ok, Verdict} -> {nocache, Verdict};
                error -> {nocache, false}
            end;
        _ ->
            {nocache, false}
    end.

%% Whether to keep a message for the user while offline (mod_offline, mod_svc_scope's deliveries).
user_exists(User, Server) ->
    case ask(#{op => isuser, user => User, server => Server}) of
        {ok, Verdict} -> {nocache, Verdict};
        error -> {nocache, {error, db_failure}}
    end.

ask(Question) ->
    case svc_control_plane:post(?HTTP_PROFILE, ?PATH, Question, ?TIMEOUT_MS) of
        {ok, #{<<"ok">> := Verdict}} when is_boolean(Verdict) ->
            note_outage(none),
            {ok, Verdict};
        {ok, _} ->
            note_outage(no_verdict),
            error;
        {error, Reason} ->
            note_outage(Reason),
            error
    end.

%% Logs only a change: the start of an outage (with its first failure), and its end.
note_outage(Problem) ->
    Failing = case Problem of none -> 0; _ -> 1 end,
    case atomics:exchange(persistent_term:get(?OUTAGE), 1, Failing) of
        Failing -> ok;
        0 -> ?ERROR_MSG("The control plane gave no usable answer to a login question (~p); "
                        "refusing every login meanwhile", [Problem]);
        1 -> ?WARNING_MSG("The control plane answers login questions again", [])
    end.
