%%% svc_control_plane: how our modules ask the control plane's internal listener a question.
%%%
%%% mod_svc_scope's `control_plane` option names a JSON file {url, secret}: the internal listener's
%%% address and ejabberd's bearer secret for it (the stack runner writes it; ejabberd reads it through
%%% its group). mod_svc_scope configures this module from it as it starts, before ejabberd_auth starts
%%% the auth methods (ejabberd_sup starts the modules first). Each kind of question has an httpc
%%% profile of its own, so that a burst of one never waits behind the other in a profile's manager.
%%%
%%% Built by the stack runner (infra/src/servers/ejabberd.ts) and infra/ejabberd.Dockerfile.
-module(svc_control_plane).

-export([configure/1, start_profile/2, post/4]).

-define(CONFIG, {?MODULE, config}).
%% A connection the control plane does not accept in this time is an outage, not a slow answer.
-define(CONNECT_TIMEOUT_MS, 1000).
%% Below the control plane's own keep-alive (fastify's 72 s), so that httpc always closes an idle
%% connection first and never sends a question down one the server is closing.
-define(KEEP_ALIVE_MS, 30000).

%% Reads the {url, secret} file. `none` (a host whose mod_svc_scope has no control_plane, such as the
%% test profile's benchmark hosts) changes nothing: the node's one control plane stays configured.
-spec configure(none | binary()) -> ok.
configure(none) ->
    ok;
configure(File) ->
    {ok, Json} = file:read_file(File),
    #{<<"url">> := Url, <<"secret">> := Secret} = jiffy:decode(Json, [return_maps]),
    persistent_term:put(?CONFIG, {string:trim(binary_to_list(Url), trailing, "/"),
                                  "Bearer " ++ binary_to_list(Secret)}).

%% Starts an httpc profile (once per node) holding up to MaxSessions kept-alive connections. A question
%% goes on an idle connection, or on a new one: max_keep_alive_length 0, since httpc would otherwise
%% queue it behind another's answer on a busy connection (up to 5 deep, the default), and a queued
%% request has no timeout of its own. Past MaxSessions busy ones, a question gets a connection of its
%% own that closes after its answer.
-spec start_profile(atom(), pos_integer()) -> ok.
start_profile(Profile, MaxSessions) ->
    case inets:start(httpc, [{profile, Profile}]) of
        {ok, _} -> ok;
        {error, {already_started, _}} -> ok
    end,
    httpc:set_options([{max_sessions, MaxSessions}, {max_keep_alive_length, 0},
                       {keep_alive_timeout, ?KEEP_ALIVE_MS}], Profile).

%% POSTs Question as JSON to Path; the decoded JSON object of a 200 answer, or why there is none.
-spec post(atom(), string(), map(), pos_integer()) -> {ok, map()} | {error, term()}.
post(Profile, Path, Question, TimeoutMs) ->
    case persistent_term:get(?CONFIG, none) of
        none ->
            {error, not_configured};
        {Url, Authorization} ->
            Request = {Url ++ Path, [{"authorization", Authorization}], "application/json",
                       jiffy:encode(Question)},
            Send = fun() ->
                           httpc:request(post, Request,
                                         [{timeout, TimeoutMs}, {connect_timeout, ?CONNECT_TIMEOUT_MS}],
                                         [{body_format, binary}], Profile)
                   end,
            %% A kept-alive connection the control plane closed as the question went out (it restarted):
            %% asked once more, on a new connection. The questions are safe to ask twice.
            Sent = case Send() of
                       {error, socket_closed_remotely} -> Send();
                       FirstAnswer -> FirstAnswer
                   end,
            case Sent of
                {ok, {{_, 200, _}, _, Body}} ->
                    try jiffy:decode(Body, [return_maps]) of
                        #{} = Decoded -> {ok, Decoded};
                        _ -> {error, not_an_object}
                    catch _:_ -> {error, invalid_json}
                    end;
                {ok, {{_, Status, _}, _, _}} ->
                    {error, {status, Status}};
                {error, Reason} ->
                    {error, Reason}
            end
    end.
