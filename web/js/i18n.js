// Polish and English text. The language is the one saved by the switch, else the
// browser's first preference, else English. `t(key, params)` fills `{name}` slots.

const LANGUAGE_KEY = 'statki.language';

export const languages = [['pl', 'Polski'], ['en', 'English']];

const en = {
  'app.title': 'Statki — Battleship online',
  'app.tagline': 'Two seas of ten by ten. Hide your fleet, find theirs. The server referees every shot and proves afterwards that no ship moved.',
  'auth.register': 'New player',
  'auth.login': 'Log in',
  'auth.name': 'Name',
  'auth.password': 'Password',
  'auth.password_optional': 'Password (optional)', 'auth.password_help': '8–128 characters; lets you log in again on another device.',
  'auth.register_button': 'Start playing',
  'auth.login_button': 'Log in',
  'auth.logout': 'Log out',
  'auth.expired': 'Your session has ended. Please sign in again.',
  'nav.lobby': 'Lobby', 'nav.ladder': 'Ladder', 'nav.profile': 'My profile', 'nav.back': 'Back to the lobby',
  language: 'Language', close: 'Close', more: 'Show more',
  'error.network': 'The server cannot be reached. Check your connection and try again.',
  'error.status': 'The server answered with status {status}.',
  'lobby.create': 'New match', 'lobby.challenge': 'Challenge a player', 'lobby.queue': 'Ranked queue',
  'lobby.open': 'Open matches', 'lobby.mine': 'Your matches', 'lobby.live': 'Live matches', 'lobby.bots': 'Play a bot',
  'lobby.join': 'Join', 'lobby.yours': 'Yours — open', 'lobby.watch': 'Watch', 'lobby.resume': 'Continue', 'lobby.view': 'View', 'lobby.play': 'Play',
  'lobby.for_you': 'Challenge for you', 'lobby.clock': '⏱ placement {placement} s · shot {shot} s',
  'lobby.none_open': 'No open matches right now. Create one and share its link.',
  'lobby.none_live': 'Nobody is playing right now.', 'lobby.none_mine': 'You have not played yet.',
  'create.ruleset': 'Rules', 'create.ranked': 'Ranked (standard rules and clocks)',
  'create.custom_clock': 'Custom clock', 'create.placement_seconds': 'Placement (seconds)', 'create.shot_seconds': 'Each shot (seconds)',
  'create.button': 'Create match', 'create.challenge_button': 'Send challenge', 'create.challenging': 'Challenging', 'create.cancel_challenge': '(cancel)',
  'create.summary': 'Fleet {fleet}; {touch}; {extra}.',
  'rules.touch_yes': 'ships may touch', 'rules.touch_no': 'ships may not touch',
  'rules.extra_yes': 'a hit shoots again', 'rules.extra_no': 'the turn passes after every shot',
  'option.extra_shot': 'Hit = shoot again', 'option.extra_shot_long': 'House rule: shoot again after a hit',
  'queue.join': 'Find an opponent', 'queue.leave': 'Stop searching', 'queue.searching': 'Searching for an opponent on the {ruleset} ladder…',
  'queue.window': 'rating window ±{window}, {waiting} waiting', 'queue.paired': 'You have been paired.',
  'notice.challenge': '{name} challenges you ({ruleset}).', 'notice.rematch': '{name} offers a rematch.',
  'notice.paired': 'Opponent found — your ranked match begins.', 'notice.rematch_started': 'The rematch begins.',
  'notice.opponent_joined': 'An opponent joined your match.', 'notice.see': 'Open',
  'match.ranked': 'ranked', 'match.unranked': 'unranked', 'match.spectating': 'watching', 'match.empty_seat': 'waiting for an opponent',
  'status.waiting': 'Waiting for an opponent to join.', 'status.waiting_spectator': 'This match is waiting for a second player.',
  'status.placing': 'Place your {ship}.', 'status.fleet_ready_waiting': 'Your fleet is ready. Waiting for the opponent’s fleet.',
  'status.both_ready': 'Both fleets are ready.', 'status.placement_spectator': 'The players are placing their fleets.',
  'status.your_turn': 'Your shot', 'status.your_extra_shot': 'Hit! Your extra shot',
  'status.their_turn': '{name}’s shot', 'status.their_extra_shot': '{name} hit and shoots again',
  'battle.first_you': 'You fire first (drawn at random).', 'battle.first_them': '{name} fires first (drawn at random).',
  'alert.your_shot': 'Your shot against {name}.', 'alert.result': '{outcome} against {name} — {reason}.',
  'alert.sound_on': 'Sound: on', 'alert.sound_off': 'Sound: off', 'alert.notify_on': 'Notifications: on', 'alert.notify_off': 'Notifications: off',
  'alert.notify_denied': 'The browser did not allow notifications.', 'lobby.your_turn': 'Your shot',
  'log.yours': 'Your shots', 'log.theirs_at_you': 'Shots at your sea', 'log.shots_by': 'Shots by', 'log.miss': 'miss', 'log.hit': 'hit', 'log.sunk': 'sunk',
  'board.under_fire': 'under fire', 'end.rating': 'Your rating on the {ruleset} ladder: {before} → {after} ({change})',
  'match.you': 'you', 'clock.ready': 'ready', 'clock.paused': 'waiting',
  'status.spectator_turn': '{name} to fire.', 'status.spectator_extra': '{name} hit and shoots again.',
  'clock.placement': 'Placement', 'clock.shot': 'Shot',
  'stream.open': 'live', 'stream.retrying': 'reconnecting…', 'stream.ended': '',
  'board.own': 'Your sea', 'board.target': 'Opponent’s sea', 'board.target_of': 'Sea of', 'board.sea_of': 'Sea of',
  'cell.water': 'water', 'cell.bow': '{ship} can start here ({orientation})', 'cell.preview': '{ship} would lie here',
  'cell.pick_up': '{ship}; press to pick it up', 'cell.fire': 'not fired at; press to fire', 'cell.unknown': 'not fired at',
  'cell.hit': 'hit', 'cell.miss': 'miss', 'cell.sunk': 'sunk', 'cell.sunk_named': 'sunk: {ship}', 'cell.marked': 'known empty',
  'cell.revealed': 'ship, not found', 'cell.own_hit': '{ship}, hit', 'cell.own_sunk': '{ship}, sunk',
  'orientation.horizontal': 'horizontal', 'orientation.vertical': 'vertical',
  'placement.title': 'Place your fleet', 'placement.ready': 'Your fleet is ready',
  'placement.next': 'Next: {ship} ({length} cells)', 'placement.rotate': 'Rotate (R): {orientation}',
  'placement.random': 'Random layout', 'placement.reroll': 'Re-roll', 'placement.random_rest': 'Random for the rest', 'placement.ready_button': 'Ready',
  'placement.by_hand': 'Place by hand', 'cell.drag': '{ship}; drag to move it',
  'placement.draft_help': 'A random layout is shown: press Ready to lock it, Re-roll for another, or drag a ship to move it. Place by hand to set each ship yourself.', 'placement.pick_up': 'Pick up', 'placement.not_placed': 'not placed',
  'placement.help': 'Marked cells are where the bow (top or left end) may go. Press a placed ship to pick it up, or drag it elsewhere. The fleet locks when the last ship stands.',
  'placement.opponent_placing': 'The opponent is still placing.', 'placement.opponent_ready': 'The opponent’s fleet is ready.',
  'fleet.sunk': 'sunk', 'fleet.sunk_count': 'Sunk {sunk} of {total}',
  'legend.keys': 'Keyboard: arrow keys move across a sea, Enter fires.', 'cell.last': 'latest shot', 'title.your_turn': 'Your turn',
  'legend.title': 'Key', 'legend.ship': 'your ship', 'legend.sunk': 'sunk ship (opponent’s colour)',
  'shot.you': 'You', 'shot.opponent': 'Opponent',
  'shot.miss': '{who} fired at {cell}: miss.', 'shot.hit': '{who} fired at {cell}: hit!',
  'shot.sunk': '{who} fired at {cell}: hit and sunk!', 'shot.sunk_named': '{who} fired at {cell}: sunk — {ship}!',
  'resign.button': 'Resign', 'resign.confirm': 'Really resign?', 'resign.cancel': 'Keep playing',
  'waiting.share': 'Send this link to your opponent, or wait for someone from the lobby:', 'waiting.link': 'Link to this match', 'waiting.withdraw': 'Withdraw the match',
  'result.won': 'You won', 'result.lost': 'You lost', 'result.draw': 'Draw', 'result.player_won': '{name} won', 'result.cancelled': 'The match was cancelled.',
  'reason.all_sunk': 'the whole fleet was sunk', 'reason.resigned': 'resignation', 'reason.shot_timeout': 'the shot clock ran out',
  'reason.placement_timeout': 'the placement clock ran out', 'reason.both_placement_timeout': 'neither fleet was placed in time',
  'reason.undefined': '',
  'end.replay': 'Replay', 'end.commitments': 'Fleet commitments',
  'end.commitments_help': 'Each fleet was committed with a salted SHA-256 hash when it locked. Your browser recomputed the hashes from the opened fleets.',
  'end.checking': 'checking…', 'end.verified': '✔ verified: the fleet never moved', 'end.mismatch': '✘ does not match the commitment', 'end.no_commitment': 'no fleet was committed',
  'end.details': 'Details', 'end.published': 'Published', 'end.salt': 'Salt', 'end.text': 'Hashed text', 'end.computed': 'Computed here',
  'rematch.offer': 'Offer a rematch', 'rematch.accept': 'Accept the rematch', 'rematch.waiting': 'Rematch offered…', 'rematch.offered_to_you': 'Rematch offered to you', 'rematch.open': 'Open the rematch',
  'replay.title': 'Replay', 'replay.back': 'Back to the match', 'replay.play': 'Play', 'replay.pause': 'Pause',
  'replay.first': 'First event', 'replay.prev': 'Previous event', 'replay.next': 'Next event', 'replay.last': 'Last event',
  'replay.position': 'Event', 'replay.step': 'event {step} of {total}', 'replay.start': 'Before the first event.',
  'event.match_created': '{who} created the match.', 'event.player_joined': '{who} joined.',
  'event.ship_placed': '{who} placed the {ship} at {cell}, {orientation}.', 'event.ship_removed': '{who} picked up the {ship}.',
  'event.fleet_locked': '{who}’s fleet is ready.', 'event.battle_started': 'The battle begins; {who} fires first.',
  'event.rating_updated': 'Ratings updated.', 'event.clock_extended': 'The clock was given back time lost to an outage.',
  'ladder.title': 'Ladder: {ruleset}', 'ladder.rulesets': 'Rule sets', 'ladder.rank': '#', 'ladder.player': 'Player', 'ladder.rating': 'Rating',
  'ladder.actions': 'Actions', 'theme': 'Theme', 'theme.auto': 'System theme', 'theme.light': 'Light', 'theme.dark': 'Dark', 'legend.ship_any': 'ship',
  'ladder.deviation': 'Deviation', 'ladder.games': 'Games', 'ladder.wld': 'W/L/D', 'ladder.challenge': 'Challenge',
  'ladder.provisional': 'provisional', 'ladder.provisional_help': 'Too few games for a settled rating', 'ladder.empty': 'No ranked games on this ladder yet.',
  'profile.history': 'Matches', 'profile.when': 'When', 'profile.ruleset': 'Rules', 'profile.opponent': 'Opponent', 'profile.outcome': 'Outcome',
  'profile.record': '{wins} won, {losses} lost, {draws} drawn', 'profile.win': 'won', 'profile.loss': 'lost', 'profile.draw': 'draw',
  'phase.waiting': 'waiting', 'phase.placement': 'placing fleets', 'phase.battle': 'battle', 'phase.finished': 'finished', 'phase.cancelled': 'cancelled',
  'account.set': 'Set a password', 'account.change': 'Change your password', 'account.why': 'With a password you can log in again on another device or after losing this browser’s data.',
  'account.current': 'Current password', 'account.new': 'New password (8–128 characters)', 'account.save': 'Save the password', 'account.saved': 'Password saved.',
  'account.revoke': 'Log out everywhere else', 'account.revoke_help': 'Ends every other session of yours (on other devices too); this browser stays signed in.', 'account.revoked': 'Every other session has ended.',
  'bot.easy': 'easy', 'bot.medium': 'medium', 'bot.hard': 'hard',
  'ruleset.statki': 'Statki', 'ruleset.classic': 'Classic', 'ruleset.battaglia': 'Battaglia',
};

const pl = {
  'app.title': 'Statki — gra w statki online',
  'app.tagline': 'Dwa morza dziesięć na dziesięć. Ukryj swoją flotę, znajdź flotę przeciwnika. Serwer sędziuje każdy strzał, a po meczu dowodzi, że żaden okręt się nie ruszył.',
  'auth.register': 'Nowy gracz', 'auth.login': 'Logowanie', 'auth.name': 'Nazwa', 'auth.password': 'Hasło',
  'auth.password_optional': 'Hasło (opcjonalne)', 'auth.password_help': '8–128 znaków; pozwala zalogować się na innym urządzeniu.',
  'auth.register_button': 'Zacznij grać', 'auth.login_button': 'Zaloguj się', 'auth.logout': 'Wyloguj',
  'auth.expired': 'Sesja wygasła. Zaloguj się ponownie.',
  'nav.lobby': 'Poczekalnia', 'nav.ladder': 'Ranking', 'nav.profile': 'Mój profil', 'nav.back': 'Wróć do poczekalni',
  language: 'Język', close: 'Zamknij', more: 'Pokaż więcej',
  'error.network': 'Nie można połączyć się z serwerem. Sprawdź połączenie i spróbuj ponownie.',
  'error.status': 'Serwer odpowiedział kodem {status}.',
  'lobby.create': 'Nowy mecz', 'lobby.challenge': 'Wyzwij gracza', 'lobby.queue': 'Kolejka rankingowa',
  'lobby.open': 'Otwarte mecze', 'lobby.mine': 'Twoje mecze', 'lobby.live': 'Trwające mecze', 'lobby.bots': 'Zagraj z botem',
  'lobby.join': 'Dołącz', 'lobby.yours': 'Twój — otwórz', 'lobby.watch': 'Oglądaj', 'lobby.resume': 'Kontynuuj', 'lobby.view': 'Zobacz', 'lobby.play': 'Graj',
  'lobby.for_you': 'Wyzwanie dla Ciebie', 'lobby.clock': '⏱ ustawianie {placement} s · strzał {shot} s',
  'lobby.none_open': 'Brak otwartych meczów. Utwórz mecz i wyślij komuś link.',
  'lobby.none_live': 'Nikt teraz nie gra.', 'lobby.none_mine': 'Nie masz jeszcze rozegranych meczów.',
  'create.ruleset': 'Zasady', 'create.ranked': 'Rankingowy (standardowe zasady i zegary)',
  'create.custom_clock': 'Własny zegar', 'create.placement_seconds': 'Ustawianie (sekundy)', 'create.shot_seconds': 'Każdy strzał (sekundy)',
  'create.button': 'Utwórz mecz', 'create.challenge_button': 'Wyślij wyzwanie', 'create.challenging': 'Wyzywasz', 'create.cancel_challenge': '(anuluj)',
  'create.summary': 'Flota {fleet}; {touch}; {extra}.',
  'rules.touch_yes': 'okręty mogą się stykać', 'rules.touch_no': 'okręty nie mogą się stykać',
  'rules.extra_yes': 'trafienie daje kolejny strzał', 'rules.extra_no': 'tura przechodzi po każdym strzale',
  'option.extra_shot': 'Trafienie = kolejny strzał', 'option.extra_shot_long': 'Zasada domowa: po trafieniu strzelasz jeszcze raz',
  'queue.join': 'Szukaj przeciwnika', 'queue.leave': 'Przestań szukać', 'queue.searching': 'Szukam przeciwnika w rankingu {ruleset}…',
  'queue.window': 'okno rankingu ±{window}, czeka: {waiting}', 'queue.paired': 'Znaleziono przeciwnika.',
  'notice.challenge': '{name} wyzywa Cię na mecz ({ruleset}).', 'notice.rematch': '{name} proponuje rewanż.',
  'notice.paired': 'Znaleziono przeciwnika — zaczyna się mecz rankingowy.', 'notice.rematch_started': 'Zaczyna się rewanż.',
  'notice.opponent_joined': 'Przeciwnik dołączył do Twojego meczu.', 'notice.see': 'Otwórz',
  'match.ranked': 'rankingowy', 'match.unranked': 'towarzyski', 'match.spectating': 'oglądasz', 'match.empty_seat': 'czeka na przeciwnika',
  'status.waiting': 'Czekamy, aż dołączy przeciwnik.', 'status.waiting_spectator': 'Ten mecz czeka na drugiego gracza.',
  'status.placing': 'Ustaw okręt: {ship}.', 'status.fleet_ready_waiting': 'Twoja flota jest gotowa. Czekamy na flotę przeciwnika.',
  'status.both_ready': 'Obie floty są gotowe.', 'status.placement_spectator': 'Gracze ustawiają floty.',
  'status.your_turn': 'Twój strzał', 'status.your_extra_shot': 'Trafiony! Twój dodatkowy strzał',
  'status.their_turn': 'Strzela {name}', 'status.their_extra_shot': '{name} trafia i strzela ponownie',
  'battle.first_you': 'Strzelasz pierwszy (wylosowano).', 'battle.first_them': 'Pierwszy strzela {name} (wylosowano).',
  'alert.your_shot': 'Twój strzał w meczu z {name}.', 'alert.result': '{outcome} z {name} — {reason}.',
  'alert.sound_on': 'Dźwięk: wł.', 'alert.sound_off': 'Dźwięk: wył.', 'alert.notify_on': 'Powiadomienia: wł.', 'alert.notify_off': 'Powiadomienia: wył.',
  'alert.notify_denied': 'Przeglądarka nie zezwoliła na powiadomienia.', 'lobby.your_turn': 'Twój strzał',
  'log.yours': 'Twoje strzały', 'log.theirs_at_you': 'Strzały w Twoje morze', 'log.shots_by': 'Strzały gracza', 'log.miss': 'pudło', 'log.hit': 'trafiony', 'log.sunk': 'zatopiony',
  'board.under_fire': 'pod ostrzałem', 'end.rating': 'Twój ranking {ruleset}: {before} → {after} ({change})',
  'match.you': 'Ty', 'clock.ready': 'gotowe', 'clock.paused': 'czeka',
  'status.spectator_turn': 'Strzela {name}.', 'status.spectator_extra': '{name} trafia i strzela ponownie.',
  'clock.placement': 'Ustawianie', 'clock.shot': 'Strzał',
  'stream.open': 'na żywo', 'stream.retrying': 'łączę ponownie…', 'stream.ended': '',
  'board.own': 'Twoje morze', 'board.target': 'Morze przeciwnika', 'board.target_of': 'Morze gracza', 'board.sea_of': 'Morze gracza',
  'cell.water': 'woda', 'cell.bow': 'tu może zacząć się {ship} ({orientation})', 'cell.preview': 'tu leżałby {ship}',
  'cell.pick_up': '{ship}; naciśnij, aby podnieść', 'cell.fire': 'nieostrzelane; naciśnij, aby strzelić', 'cell.unknown': 'nieostrzelane',
  'cell.hit': 'trafiony', 'cell.miss': 'pudło', 'cell.sunk': 'zatopiony', 'cell.sunk_named': 'zatopiony: {ship}', 'cell.marked': 'na pewno puste',
  'cell.revealed': 'okręt, nieodnaleziony', 'cell.own_hit': '{ship}, trafiony', 'cell.own_sunk': '{ship}, zatopiony',
  'orientation.horizontal': 'poziomo', 'orientation.vertical': 'pionowo',
  'placement.title': 'Ustaw flotę', 'placement.ready': 'Twoja flota jest gotowa',
  'placement.next': 'Teraz: {ship} ({length} pola)', 'placement.rotate': 'Obróć (R): {orientation}',
  'placement.random': 'Losowy układ', 'placement.reroll': 'Losuj ponownie', 'placement.random_rest': 'Resztę losowo', 'placement.ready_button': 'Gotowe',
  'placement.by_hand': 'Ustaw ręcznie', 'cell.drag': '{ship}; przeciągnij, aby przesunąć',
  'placement.draft_help': 'Pokazujemy losowy układ: Gotowe zamyka flotę, Losuj ponownie daje inny, a okręt można przeciągnąć. Ustaw ręcznie, aby ustawić każdy okręt samemu.', 'placement.pick_up': 'Podnieś', 'placement.not_placed': 'nieustawiony',
  'placement.help': 'Zaznaczone pola to miejsca, gdzie może stanąć dziób (górny lub lewy koniec). Naciśnij postawiony okręt, aby go podnieść, albo przeciągnij go gdzie indziej. Flota zamyka się, gdy stanie ostatni okręt.',
  'placement.opponent_placing': 'Przeciwnik wciąż ustawia.', 'placement.opponent_ready': 'Flota przeciwnika jest gotowa.',
  'fleet.sunk': 'zatopiony', 'fleet.sunk_count': 'Zatopione: {sunk} z {total}',
  'legend.keys': 'Klawiatura: strzałki przesuwają po morzu, Enter strzela.', 'cell.last': 'ostatni strzał', 'title.your_turn': 'Twoja tura',
  'legend.title': 'Legenda', 'legend.ship': 'Twój okręt', 'legend.sunk': 'zatopiony okręt (w kolorze przeciwnika)',
  'shot.you': 'Ty', 'shot.opponent': 'Przeciwnik',
  'shot.miss': '{who} → {cell}: pudło.', 'shot.hit': '{who} → {cell}: trafiony!',
  'shot.sunk': '{who} → {cell}: trafiony, zatopiony!', 'shot.sunk_named': '{who} → {cell}: zatopiony — {ship}!',
  'resign.button': 'Poddaj się', 'resign.confirm': 'Na pewno się poddać?', 'resign.cancel': 'Graj dalej',
  'waiting.share': 'Wyślij ten link przeciwnikowi albo poczekaj na kogoś z poczekalni:', 'waiting.link': 'Link do meczu', 'waiting.withdraw': 'Wycofaj mecz',
  'result.won': 'Wygrałeś', 'result.lost': 'Przegrałeś', 'result.draw': 'Remis', 'result.player_won': 'Wygrywa {name}', 'result.cancelled': 'Mecz został anulowany.',
  'reason.all_sunk': 'zatopiona cała flota', 'reason.resigned': 'poddanie', 'reason.shot_timeout': 'skończył się czas na strzał',
  'reason.placement_timeout': 'skończył się czas na ustawienie', 'reason.both_placement_timeout': 'żadna flota nie stanęła na czas',
  'reason.undefined': '',
  'end.replay': 'Powtórka', 'end.commitments': 'Zobowiązania flot',
  'end.commitments_help': 'Każda flota została zobowiązana solonym skrótem SHA-256 w chwili zamknięcia. Twoja przeglądarka przeliczyła skróty z odkrytych flot.',
  'end.checking': 'sprawdzam…', 'end.verified': '✔ zgodne: flota się nie ruszyła', 'end.mismatch': '✘ niezgodne ze zobowiązaniem', 'end.no_commitment': 'flota nie została zobowiązana',
  'end.details': 'Szczegóły', 'end.published': 'Opublikowane', 'end.salt': 'Sól', 'end.text': 'Haszowany tekst', 'end.computed': 'Policzone tutaj',
  'rematch.offer': 'Zaproponuj rewanż', 'rematch.accept': 'Przyjmij rewanż', 'rematch.waiting': 'Rewanż zaproponowany…', 'rematch.offered_to_you': 'Masz propozycję rewanżu', 'rematch.open': 'Otwórz rewanż',
  'replay.title': 'Powtórka', 'replay.back': 'Wróć do meczu', 'replay.play': 'Odtwórz', 'replay.pause': 'Pauza',
  'replay.first': 'Pierwsze zdarzenie', 'replay.prev': 'Poprzednie zdarzenie', 'replay.next': 'Następne zdarzenie', 'replay.last': 'Ostatnie zdarzenie',
  'replay.position': 'Zdarzenie', 'replay.step': 'zdarzenie {step} z {total}', 'replay.start': 'Przed pierwszym zdarzeniem.',
  'event.match_created': '{who} tworzy mecz.', 'event.player_joined': '{who} dołącza.',
  'event.ship_placed': '{who} ustawia okręt {ship} na {cell}, {orientation}.', 'event.ship_removed': '{who} podnosi okręt {ship}.',
  'event.fleet_locked': 'Flota gracza {who} jest gotowa.', 'event.battle_started': 'Zaczyna się bitwa; pierwszy strzela {who}.',
  'event.rating_updated': 'Ranking zaktualizowany.', 'event.clock_extended': 'Zegar oddał czas stracony przez awarię.',
  'ladder.title': 'Ranking: {ruleset}', 'ladder.rulesets': 'Zestawy zasad', 'ladder.rank': '#', 'ladder.player': 'Gracz', 'ladder.rating': 'Punkty',
  'ladder.actions': 'Akcje', 'theme': 'Motyw', 'theme.auto': 'Motyw systemu', 'theme.light': 'Jasny', 'theme.dark': 'Ciemny', 'legend.ship_any': 'okręt',
  'ladder.deviation': 'Odchylenie', 'ladder.games': 'Gry', 'ladder.wld': 'W/P/R', 'ladder.challenge': 'Wyzwij',
  'ladder.provisional': 'tymczasowy', 'ladder.provisional_help': 'Za mało gier na ustalony ranking', 'ladder.empty': 'W tym rankingu nie rozegrano jeszcze żadnej gry.',
  'profile.history': 'Mecze', 'profile.when': 'Kiedy', 'profile.ruleset': 'Zasady', 'profile.opponent': 'Przeciwnik', 'profile.outcome': 'Wynik',
  'profile.record': 'wygrane: {wins}, przegrane: {losses}, remisy: {draws}', 'profile.win': 'wygrana', 'profile.loss': 'przegrana', 'profile.draw': 'remis',
  'phase.waiting': 'czeka', 'phase.placement': 'ustawianie flot', 'phase.battle': 'bitwa', 'phase.finished': 'zakończony', 'phase.cancelled': 'anulowany',
  'account.set': 'Ustaw hasło', 'account.change': 'Zmień hasło', 'account.why': 'Z hasłem zalogujesz się ponownie na innym urządzeniu albo po utracie danych tej przeglądarki.',
  'account.current': 'Obecne hasło', 'account.new': 'Nowe hasło (8–128 znaków)', 'account.save': 'Zapisz hasło', 'account.saved': 'Hasło zapisane.',
  'account.revoke': 'Wyloguj wszędzie indziej', 'account.revoke_help': 'Kończy wszystkie Twoje inne sesje (także na innych urządzeniach); ta przeglądarka pozostaje zalogowana.', 'account.revoked': 'Wszystkie inne sesje zostały zakończone.',
  'bot.easy': 'łatwy', 'bot.medium': 'średni', 'bot.hard': 'trudny',
  'ruleset.statki': 'Statki', 'ruleset.classic': 'Klasyczne', 'ruleset.battaglia': 'Battaglia',
};

// Ship names as the API gives them, in Polish where the preset names them in English.
const shipNamesPl = {
  Carrier: 'Lotniskowiec', Battleship: 'Pancernik', Cruiser: 'Krążownik', Submarine: 'Okręt podwodny',
  Destroyer: 'Niszczyciel', 'Torpedo boat': 'Kuter torpedowy',
};

const dictionaries = { en, pl };

function initialLanguage() {
  const saved = localStorage.getItem(LANGUAGE_KEY);
  if (saved && dictionaries[saved]) return saved;
  const preferred = (navigator.languages || [navigator.language || 'en']).map((code) => code.slice(0, 2).toLowerCase());
  return preferred.find((code) => dictionaries[code]) || 'en';
}

let language = initialLanguage();

export function currentLanguage() {
  return language;
}

export function setLanguage(code) {
  if (!dictionaries[code]) return;
  language = code;
  localStorage.setItem(LANGUAGE_KEY, code);
}

export function t(key, params = {}) {
  const text = dictionaries[language][key] ?? en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, name) => (params[name] ?? ''));
}

export function rulesetTitle(id) {
  return t(`ruleset.${id}`) === `ruleset.${id}` ? id : t(`ruleset.${id}`);
}

export function shipName(name) {
  return language === 'pl' ? shipNamesPl[name] || name : name;
}
