%%% svc_circles: the rooms and boards of circles (docs/circles.md).
%%%
%%% A circle's rooms are <prefix>.+<org key>.r+<room key> on the MUC service. An open room or a
%%% board is not members-only: only the circle's identities reach it at all (mod_svc_scope), so a
%%% room of 10,000 members keeps no list of them, and a member joining costs the room nothing. A
%%% closed room is members-only, its members affiliated. Who may post (a board: admins and mods) and
%%% whether a room is archived are mod_svc_scope's questions to the control plane.
%%%
%%% The control plane calls two commands (registered by mod_svc_scope): svc_set_room_places puts
%%% people in or out of many rooms in one call (a block is an outcast in every room of the circle at
%%% once; orgs' team rooms use it too), and svc_set_bookmarks rewrites many identities' bookmarks in
%%% one call (a room archived leaves every member's client).
-module(svc_circles).

-export([is_circle_room/1, set_places/2, set_bookmarks/2]).

-include("logger.hrl").
-include("xmpp.hrl").
-include("mod_muc_room.hrl").

%% Whether a room node is a circle's room: <prefix>.+<12-character org key>.r+<room key>.
-spec is_circle_room(binary()) -> boolean().
is_circle_room(LUser) ->
    svc_conversations:is_org_room(LUser, <<"r+">>).

%% Puts each {Room, JID, Place} in place (any org's rooms), rooms side by side, each room's changes in
%% the order given: member (affiliated), outcast (banned: sent out, and refused on return), none (no
%% affiliation, and sent out if present). A state, not a change: a place already held costs nothing,
%% and a call that failed part way is put right by the next. Answers how many rooms, or an error when
%% any failed.
set_places(Service, Places) ->
    case parse_places(Places) of
        {error, _} = Error ->
            Error;
        ByRoom ->
            svc_conversations:each_named_room(
              maps:keys(ByRoom), Service,
              fun(Room, Pid) -> place_all(Pid, lists:reverse(maps:get(Room, ByRoom))) end)
    end.

parse_places(Places) ->
    try
        lists:foldl(
          fun({Room, Jid, Place}, Acc) ->
                  svc_conversations:is_org_room(Room, any)
                      orelse throw({error, <<"not an org's room: ", Room/binary>>}),
                  Entry = {bare(Jid), place(Place)},
                  maps:update_with(Room, fun(Entries) -> [Entry | Entries] end, [Entry], Acc)
          end, #{}, Places)
    catch throw:{error, _} = Error -> Error
    end.

place(<<"member">>) -> member;
place(<<"outcast">>) -> outcast;
place(<<"none">>) -> none;
place(Other) -> throw({error, <<"place must be member, outcast or none, not ", Other/binary>>}).

bare(Jid) ->
    try jid:remove_resource(jid:decode(Jid))
    catch _:_ -> throw({error, <<"invalid JID: ", Jid/binary>>})
    end.

place_all(Pid, Entries) ->
    case mod_muc_room:get_state(Pid) of
        {ok, #state{affiliations = Affiliations, users = Users}} ->
            Results = [put_in_place(Pid, JID, Place, affiliation(jid:tolower(JID), Affiliations), Users)
                       || {JID, Place} <- Entries],
            case lists:filter(fun(Result) -> Result /= ok end, Results) of
                [] -> ok;
                [Failure | _] -> Failure
            end;
        {error, _} = Error ->
            Error
    end.

affiliation(LJID, Affiliations) ->
    case maps:get(LJID, Affiliations, none) of
        {Affiliation, _Reason} -> Affiliation;
        Affiliation -> Affiliation
    end.

put_in_place(Pid, JID, Place, Place, Users) ->
    %% Held already; someone without an affiliation may still be present in an open room.
    case Place of
        none -> send_out(Pid, JID, Users);
        _ -> ok
    end;
put_in_place(Pid, JID, Place, _Held, Users) ->
    Reason = case Place of
                 outcast -> <<"Blocked in this circle">>;
                 _ -> <<>>
             end,
    case mod_muc_room:change_item(Pid, JID, affiliation, Place, Reason) of
        {ok, _} when Place == none -> send_out(Pid, JID, Users);
        {ok, _} -> ok;
        {error, Error} -> {error, {Place, jid:encode(JID), Error}}
    end.

%% Every occupant of the bare JID sent out (role none): a member taken out of an open room.
send_out(Pid, JID, Users) ->
    LJID = jid:tolower(JID),
    Results = [mod_muc_room:change_item(Pid, Full, role, none, <<"Taken out of this room">>)
               || #user{jid = Full} <- maps:values(Users),
                  jid:tolower(jid:remove_resource(Full)) == LJID],
    case [Failure || {error, _} = Failure <- Results] of
        [] -> ok;
        [Failure | _] -> Failure
    end.

%% Replaces each {User, Storage} identity's XEP-0048 bookmarks (private XML storage) with Storage,
%% a <storage xmlns='storage:bookmarks'/> element. Answers how many, or an error when any failed.
set_bookmarks(Host, Items) ->
    Results = [set_bookmark(User, Host, Storage) || {User, Storage} <- Items],
    case [Failure || Failure <- Results, Failure /= ok] of
        [] ->
            length(Items);
        [Failure | _] = Failures ->
            ?ERROR_MSG("~B of ~B bookmarks not stored, such as: ~p", [length(Failures), length(Items), Failure]),
            {error, iolist_to_binary(io_lib:format("~B of ~B bookmarks could not be stored",
                                                   [length(Failures), length(Items)]))}
    end.

set_bookmark(User, Host, Storage) ->
    case fxml_stream:parse_element(Storage) of
        #xmlel{name = <<"storage">>} = El ->
            case fxml:get_tag_attr_s(<<"xmlns">>, El) of
                <<"storage:bookmarks">> ->
                    case mod_private:set_data(jid:make(User, Host), [{<<"storage:bookmarks">>, El}]) of
                        ok -> ok;
                        Other -> {error, {User, Other}}
                    end;
                _ -> {error, {User, not_bookmarks}}
            end;
        _ ->
            {error, {User, not_storage}}
    end.
