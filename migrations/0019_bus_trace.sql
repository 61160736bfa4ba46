-- The embedded bus keeps the trace context a message was published in (services/bus/tracing.ts), as
-- NATS keeps it in the message's headers: one inbound message is one trace across the stages.
ALTER TABLE bus_messages ADD COLUMN traceparent text;
