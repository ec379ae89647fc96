# Copies the installed tree FROM to TO (symlinks kept), so that the consumers use a tree that was
# installed elsewhere: what only works in place fails there.
file(REMOVE_RECURSE ${TO})
file(COPY ${FROM}/ DESTINATION ${TO})
