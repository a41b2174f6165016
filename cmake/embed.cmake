# embed.cmake - turn a text file into a C header holding it as a string literal.
# cmake -DIN=file -DOUT=header -DNAME=symbol -P embed.cmake
file(READ "${IN}" content)
string(REPLACE "\\" "\\\\" content "${content}")
string(REPLACE "\"" "\\\"" content "${content}")
string(REPLACE "\n" "\\n\"\n\"" content "${content}")
file(WRITE "${OUT}" "/* generated from ${IN} by cmake/embed.cmake */\nstatic const char ${NAME}[] =\n\"${content}\";\n")
