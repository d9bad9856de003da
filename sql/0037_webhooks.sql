-- 0037_webhooks.sql -- repo webhooks (docs/webhooks.md): the hooks a repo's
-- managers registered, and the durable queue of their deliveries. An event
-- (a commit landing, a build changing state) adds one delivery per hook
-- subscribed to its scope, in the writer's process; a background thread of
-- khub serve on any node delivers it (FOR UPDATE SKIP LOCKED: one node per
-- delivery), retrying with backoff, and logs every attempt.

CREATE TABLE webhooks (
    id          bigserial PRIMARY KEY,
    repo_id     bigint NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    url         text NOT NULL,
    secret      text NOT NULL,                  -- signs the bodies; never answered after creation
    scopes      text[] NOT NULL,                -- 'repo.content', 'repo.build'
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_repo ON webhooks (repo_id);

CREATE TABLE webhook_deliveries (
    id              bigserial PRIMARY KEY,
    webhook_id      bigint NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    event           text NOT NULL,              -- scope.action: 'repo.content.update'
    payload         text NOT NULL,              -- the JSON body, signed as sent
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0, -- attempts started
    next_attempt_at timestamptz NOT NULL DEFAULT now(),  -- also an attempt's lease; settled: when
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries (webhook_id, id);

CREATE TABLE webhook_attempts (
    id           bigserial PRIMARY KEY,
    delivery_id  bigint NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
    attempt      integer NOT NULL,
    at           timestamptz NOT NULL DEFAULT now(),
    status_code  integer,                       -- NULL: no HTTP answer
    duration_ms  bigint NOT NULL,
    error        text
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, attempt);
