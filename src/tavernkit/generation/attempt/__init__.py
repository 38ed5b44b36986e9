"""One attempt of a turn: its prompt shaped for its model (:mod:`.chat_prompt` for the chat
family, :mod:`.text_prompt` for text completion), how its provider sends (:mod:`.sending`:
request hooks, same-request retry, abort, observation), what it does after a reply streamed
(:mod:`.steps`: restart, tool round, empty reply, review), the line it leaves in the turn's
attempts log (:mod:`.log`), and the one-attempt plan that tasks and the request API send
through (:mod:`.one_request`)."""
