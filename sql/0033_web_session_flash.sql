-- 0033_web_session_flash.sql -- a session's one-time message: the page
-- after a POST (post, redirect, get) shows it once and clears it in the same
-- statement. It holds a new token between "Create" and the page that shows
-- it, encrypted with a key derived from the session id, which the database
-- never sees (web/session.c), so this column alone reveals no token.
ALTER TABLE web_sessions ADD COLUMN flash text;
