#!/usr/bin/python3
"""The tests' independent AMQP 0-9-1 client (pika, another implementation than walhook's
rabbitmq-c): declares what an operator would, and drains a queue, printing one JSON line per
message so the C++ tests compare bytes.

  amqp_tool.py declare --port P --exchange X [--type direct] [--queue Q --key K [--max-length N]]
  amqp_tool.py drain   --port P --queue Q [--max N] [--idle S]
  amqp_tool.py delete  --port P [--exchange X] [--queue Q]

drain prints {"message_id", "routing_key", "exchange", "content_type", "delivery_mode",
"timestamp", "headers" (strings), "body_b64", "redelivered"} per message and acks each; it stops
after --max messages or when none came for --idle seconds.
"""
import argparse
import base64
import json
import sys

import pika


def connect(port):
    params = pika.ConnectionParameters(host="127.0.0.1", port=port,
                                       credentials=pika.PlainCredentials("guest", "guest"),
                                       connection_attempts=3, retry_delay=0.5, blocked_connection_timeout=30)
    return pika.BlockingConnection(params)


def text(v):
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def declare(ch, a):
    ch.exchange_declare(exchange=a.exchange, exchange_type=a.type, durable=True)
    if a.queue:
        args = {"x-max-length": a.max_length, "x-overflow": "reject-publish"} if a.max_length else None
        ch.queue_declare(queue=a.queue, durable=True, arguments=args)
        ch.queue_bind(queue=a.queue, exchange=a.exchange, routing_key=a.key)


def drain(ch, a):
    n = 0
    for method, props, body in ch.consume(a.queue, inactivity_timeout=a.idle):
        if method is None:
            break
        print(json.dumps({
            "message_id": props.message_id,
            "routing_key": method.routing_key,
            "exchange": method.exchange,
            "content_type": props.content_type,
            "delivery_mode": props.delivery_mode,
            "timestamp": props.timestamp,
            "headers": {k: text(v) for k, v in (props.headers or {}).items()},
            "body_b64": base64.b64encode(body).decode("ascii"),
            "redelivered": method.redelivered,
        }), flush=True)
        ch.basic_ack(method.delivery_tag)
        n += 1
        if a.max and n >= a.max:
            break
    ch.cancel()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["declare", "drain", "delete"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--exchange", default="")
    p.add_argument("--type", default="direct")
    p.add_argument("--queue", default="")
    p.add_argument("--key", default="")
    p.add_argument("--max", type=int, default=0)
    p.add_argument("--idle", type=float, default=1.0)
    p.add_argument("--max-length", type=int, default=0,
                   help="declare: the queue holds at most N messages and refuses more (Basic.Nack)")
    a = p.parse_args()
    conn = connect(a.port)
    ch = conn.channel()
    if a.command == "declare":
        declare(ch, a)
    elif a.command == "drain":
        drain(ch, a)
    else:
        if a.queue:
            ch.queue_delete(queue=a.queue)
        if a.exchange:
            ch.exchange_delete(exchange=a.exchange)
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
