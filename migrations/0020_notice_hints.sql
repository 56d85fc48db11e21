-- Deleting a player announces it on the token channel, so every replica re-reads the row
-- (finds none) and refuses the player's tokens at once, cached or not. The payload only
-- names the player: replicas never trust a notification's value.
CREATE FUNCTION statki_player_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('statki_tokens', OLD.id::text);
    RETURN OLD;
END;
$$;

CREATE TRIGGER players_deleted_notify
AFTER DELETE ON players
FOR EACH ROW EXECUTE FUNCTION statki_player_deleted();
