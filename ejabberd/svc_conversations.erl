%%% svc_conversations: the rooms of businesses' customer conversations (docs/businesses.md).
%%%
%%% A business's one public chat is a room per customer, <prefix>.+<org key>.c+<room key> on the MUC
%%% service: members-only, its members the customer and the staff who work the inbox, each also
%%% subscribed (MUC/Sub) under the nickname the control plane gives them, so that they receive the
%%% conversation without joining it, offline included. Who may post is mod_svc_scope's question to the
%%% control plane; who is in is the room's affiliations, kept here.
%%%
%%% The control plane calls three commands (registered by mod_svc_scope): svc_open_conversation makes
%%% or refreshes one room with its people in one call, svc_set_conversation_staff brings every room
%%% of a business to its inbox's staff at once, and svc_set_conversation_titles renames them. A
%%% fourth, svc_set_rooms_max_users, gives any rooms of an app a new size, through the same walk.
-module(svc_conversations).

-export([is_conversation/1, is_org_room/2, open/7, set_staff/4, set_titles/4, set_max_users/3,
         each_named_room/3]).

-include("logger.hrl").
-include("xmpp.hrl").
-include("mod_muc_room.hrl").

%% What a subscriber receives: the messages and the subject.
-define(NODES, [?NS_MUCSUB_NODES_MESSAGES, ?NS_MUCSUB_NODES_SUBJECT]).
%% Rooms changed side by side by a staff change.
-define(WORKERS, 8).

%% Whether a room node is a conversation room: <prefix>.+<12-character org key>.c+<room key>.
-spec is_conversation(binary()) -> boolean().
is_conversation(LUser) ->
    is_org_room(LUser, <<"c+">>).

%% Whether a node is an org's room of a kind: <prefix>.+<12-character org key>.<Marker><room key>;
%% with `any`, an org's room of any kind (a team's is <prefix>.+<org key>.<team>).
-spec is_org_room(binary(), binary() | any) -> boolean().
is_org_room(LUser, Marker) ->
    case binary:split(LUser, <<".">>) of
        [_Prefix, <<"+", Rest/binary>>] ->
            case binary:split(Rest, <<".">>) of
                [Key, Room] when byte_size(Key) == 12 -> is_of_kind(Room, Marker);
                _ -> false
            end;
        _ ->
            false
    end.

is_of_kind(Room, any) -> Room /= <<>>;
is_of_kind(<<Marker:2/binary, RoomKey/binary>>, Marker) -> RoomKey /= <<>>;
is_of_kind(_Room, _Marker) -> false.

%% Makes the room with its members (JID => nickname), or, when it exists (a conversation reopened),
%% brings it to them as set_staff does (members and subscribers under those nicknames, no other
%% identity of the business). The title and description are
%% the public chat's name and line; the subject, when not empty, is the business's greeting: what a
%% customer sees first.
open(Name, Service, Title, Description, Subject, MaxUsers, Members) ->
    case {jid:nodeprep(Name), people(Members)} of
        {error, _} -> {error, <<"invalid room name">>};
        {_, {error, _} = Error} -> Error;
        {Room, People} ->
            case is_conversation(Room) andalso ejabberd_router:is_my_route(Service) of
                false ->
                    {error, <<"not a conversation room of this server">>};
                true ->
                    case mod_muc:find_online_room(Room, Service) of
                        {ok, Pid} ->
                            %% Reopened: the room is brought to its people as a staff change would.
                            case reconcile(Pid, wanted(People), is_staff(org_prefix(Room))) of
                                ok -> ok;
                                Failure ->
                                    ?ERROR_MSG("Cannot bring people into ~ts: ~p", [Room, Failure]),
                                    {error, <<"cannot bring everyone into the room">>}
                            end;
                        error -> create(Room, Service, [{title, Title}, {description, Description},
                                                        {subject, Subject}, {max_users, MaxUsers}],
                                        People)
                    end
            end
    end.

create(Room, Service, Given, People) ->
    ServerHost = ejabberd_router:host_of_route(Service),
    Own = Given ++ [{persistent, true}, {public, false},
           {public_list, false}, {members_only, true},
           %% A moderated room lets a user back in with the role they last had (docs/orgs.md).
           {moderated, false},
           %% Private messages through the room would reach a customer outside the conversation.
           {allow_private_messages, false}, {allow_change_subj, false}, {allow_user_invites, false},
           {allow_subscription, true}, {mam, true},
           {affiliations, [{jid:tolower(JID), {member, <<>>}} || {JID, _} <- People]},
           {subscribers, [{JID, Nick, ?NODES} || {JID, Nick} <- People]}],
    Opts = lists:ukeymerge(1, lists:keysort(1, Own),
                           lists:keysort(1, mod_muc_opt:default_room_options(ServerHost))),
    case mod_muc:create_room(Service, Room, Opts) of
        ok ->
            {atomic, _} = mod_muc:store_room(ServerHost, Service, Room, Opts),
            ok;
        {error, Reason} ->
            ?ERROR_MSG("Cannot make conversation room ~ts: ~p", [Room, Reason]),
            {error, <<"cannot make the room">>}
    end.

%% Gives each named room (a business's conversation rooms) the public chat's name and line as its
%% title and description. Answers how many rooms, or an error naming how many failed.
set_titles(Rooms, Service, Title, Description) ->
    each_room(Rooms, Service,
              fun(Pid) ->
                      case mod_muc_room:get_config(Pid) of
                          {ok, Config} ->
                              ok_or_fail(mod_muc_room:set_config(
                                           Pid, Config#config{title = Title, description = Description}));
                          {error, _} = Error ->
                              Error
                      end
              end).

%% Brings each named room (a business's conversation rooms and its staff room) to the inbox's staff:
%% Members (JID => nickname) are members and subscribers under that nickname, and every other
%% identity of the business (its JID starts with OrgPrefix, <prefix>.+<org key>.) is neither. A
%% state, not a change: a call that failed part way, or a change rolled back after it, is put right
%% by the next. A staff member in a room under another nickname is sent out (they come back under
%% the right one). The customer, a personal identity, is never touched.
set_staff(OrgPrefix, Service, Rooms, Members) ->
    case {re:run(OrgPrefix, <<"^[a-z0-9]{10}\\.\\+[a-z0-9]{12}\\.\\z">>, [{capture, none}]),
          people(Members)} of
        {nomatch, _} -> {error, <<"prefix must be a business's: <prefix>.+<org key>.">>};
        {_, {error, _} = Error} -> Error;
        {match, People} ->
            Wanted = wanted(People),
            IsStaff = is_staff(OrgPrefix),
            each_room(Rooms, Service, fun(Pid) -> reconcile(Pid, Wanted, IsStaff) end)
    end.

wanted(People) ->
    maps:from_list([{jid:tolower(JID), {JID, Nick}} || {JID, Nick} <- People]).

%% Whether a bare JID is an identity of the business whose nodes start with OrgPrefix.
is_staff(OrgPrefix) ->
    fun({LUser, _, _}) -> binary:longest_common_prefix([LUser, OrgPrefix]) == byte_size(OrgPrefix) end.

%% The business's node prefix of one of its conversation rooms: <prefix>.+<org key>. of
%% <prefix>.+<org key>.c+<room key>.
org_prefix(Room) ->
    [Prefix, <<"+", Rest/binary>>] = binary:split(Room, <<".">>),
    [Key, _] = binary:split(Rest, <<".">>),
    <<Prefix/binary, ".+", Key/binary, ".">>.

reconcile(Pid, Wanted, IsStaff) ->
    case mod_muc_room:get_state(Pid) of
        {ok, #state{affiliations = Affiliations, users = Users,
                    muc_subscribers = #muc_subscribers{subscribers = Subscribers}}} ->
            Present = lists:usort([L || L <- maps:keys(Affiliations) ++ maps:keys(Subscribers), IsStaff(L)]),
            Gone = [remove(Pid, jid:make(L)) || L <- Present, not maps:is_key(L, Wanted)],
            Settled = fun(L, Nick) ->
                              is_member(maps:get(L, Affiliations, none)) andalso
                                  case maps:find(L, Subscribers) of
                                      {ok, #subscriber{nick = Nick}} -> true;
                                      _ -> false
                                  end
                      end,
            Added = [add(Pid, JID, Nick) || {L, {JID, Nick}} <- maps:to_list(Wanted), not Settled(L, Nick)],
            Renamed = [kick(Pid, JID) || #user{jid = JID, nick = Nick} <- maps:values(Users),
                                         renamed(jid:tolower(jid:remove_resource(JID)), Nick, Wanted)],
            case lists:filter(fun(Result) -> Result /= ok end, Gone ++ Added ++ Renamed) of
                [] -> ok;
                [Failure | _] -> Failure
            end;
        {error, _} = Error ->
            Error
    end.

%% Gives each named room of the service (any of an app's rooms) an occupant limit of MaxUsers.
%% Rooms the service does not have are answered, not failed: the control plane makes those itself.
%% Any other failure is an error naming how many rooms it hit.
set_max_users(_Rooms, _Service, MaxUsers) when MaxUsers < 1 ->
    {error, <<"max_users must be at least 1">>};
set_max_users(Rooms, Service, MaxUsers) ->
    Failures = each_failure(Rooms, Service,
                            fun(_Name, Pid) ->
                                    case mod_muc_room:get_config(Pid) of
                                        {ok, Config} ->
                                            ok_or_fail(mod_muc_room:set_config(
                                                         Pid, Config#config{max_users = MaxUsers}));
                                        {error, _} = Error ->
                                            Error
                                    end
                            end),
    case [Failure || {_Name, Reason} = Failure <- Failures, Reason /= {error, not_found}] of
        [] -> [Name || {Name, _} <- Failures];
        Failed -> failed(Failed, Rooms)
    end.

is_member({Affiliation, _Reason}) -> is_member(Affiliation);
is_member(Affiliation) -> Affiliation == member.

renamed(L, Nick, Wanted) ->
    case maps:find(L, Wanted) of
        {ok, {_, Wanted1}} -> Wanted1 /= Nick;
        error -> false
    end.

each_room(Rooms, Service, Fun) ->
    each_named_room(Rooms, Service, fun(_Name, Pid) -> Fun(Pid) end).

%% Fun(Name, Pid) for each named room of the service, loaded if it is not running, a few workers side
%% by side (each room is a process of its own). How many rooms, or an error when any of them failed.
each_named_room(Rooms, Service, Fun) ->
    case each_failure(Rooms, Service, Fun) of
        [] -> length(Rooms);
        Failures -> failed(Failures, Rooms)
    end.

%% {Name, Reason} of each room that Fun(Name, Pid) did not answer ok for; {error, not_found} for a
%% room the service does not have.
each_failure(Rooms, Service, Fun) ->
    ServerHost = ejabberd_router:host_of_route(Service),
    Apply = fun(Name) ->
                    try mod_muc:unhibernate_room(ServerHost, Service, Name) of
                        {ok, Pid} -> Fun(Name, Pid);
                        error -> {error, not_found}
                    catch Class:Reason -> {error, {Class, Reason}}
                    end
            end,
    lists:append(misc:pmap(fun(Share) ->
                                   [{Name, Result} || Name <- Share, (Result = Apply(Name)) /= ok]
                           end, shares(Rooms, ?WORKERS))).

failed([{Name, Reason} | _] = Failures, Rooms) ->
    ?ERROR_MSG("~B of ~B rooms not changed, such as ~ts: ~p",
               [length(Failures), length(Rooms), Name, Reason]),
    {error, iolist_to_binary(io_lib:format("~B of ~B rooms could not be changed",
                                           [length(Failures), length(Rooms)]))}.

%% The list dealt into N shares (fewer when it is shorter).
shares(List, N) ->
    Indexed = lists:zip(lists:seq(0, length(List) - 1), List),
    [[X || {I, X} <- Indexed, I rem N == K] || K <- lists:seq(0, min(N, length(List)) - 1)].

add(Pid, JID, Nick) ->
    case mod_muc_room:change_item(Pid, JID, affiliation, member, <<>>) of
        {ok, _} ->
            case mod_muc_room:subscribe(Pid, JID, Nick, ?NODES) of
                {ok, _} -> ok;
                {error, Text} -> {error, {subscribe, jid:encode(JID), Nick, Text}}
            end;
        {error, Reason} ->
            {error, {member, jid:encode(JID), Reason}}
    end.

remove(Pid, JID) ->
    case mod_muc_room:change_item(Pid, JID, affiliation, none, <<>>) of
        {ok, _} -> ok_or_fail(mod_muc_room:unsubscribe(Pid, JID));
        {error, _} = Error -> Error
    end.

%% An occupant sent out (role none), to come back under the name they have now.
kick(Pid, JID) ->
    ok_or_fail(mod_muc_room:change_item(Pid, JID, role, none, <<"Your name here has changed">>)).

ok_or_fail(ok) -> ok;
ok_or_fail({ok, _}) -> ok;
ok_or_fail({error, _} = Error) -> Error.

%% [{Jid, Nick}] as the HTTP API passes them, as bare JIDs.
people(Members) ->
    try [{bare(Jid), Nick} || {Jid, Nick} <- Members, Nick /= <<>> orelse throw(nick)]
    catch throw:nick -> {error, <<"every member needs a nickname">>};
          throw:jid -> {error, <<"invalid member JID">>}
    end.

bare(Jid) ->
    try jid:remove_resource(jid:decode(Jid))
    catch _:_ -> throw(jid)
    end.
