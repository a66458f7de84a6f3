# cmake -DFABENCH=bin -DHELP2MAN=help2man -DVERSION=v -DSTATIC=fabench.h2m -DOUT=fabench.1.gz -P this
# The man page from the binary itself: help2man reads `fabench --help`; every command's own
# --help goes into a COMMAND OPTIONS section; STATIC adds the hand-written sections.
foreach(v FABENCH HELP2MAN VERSION STATIC OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "FabenchMan.cmake: -D${v}= missing")
  endif()
endforeach()

function(run_help out)
  execute_process(COMMAND ${FABENCH} ${ARGN} --help OUTPUT_VARIABLE text RESULT_VARIABLE rc
                  TIMEOUT 30)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${FABENCH} ${ARGN} --help failed (${rc})")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# the commands: the indented words of the main usage's "commands:" list
run_help(main)
string(REGEX MATCHALL "\n  [a-z0-9]+  " words "${main}")
set(gen "[COMMAND OPTIONS]\n")
foreach(w ${words})
  string(STRIP "${w}" cmd)
  if(cmd STREQUAL "version")
    continue()
  endif()
  run_help(text ${cmd})
  # verbatim in roff: backslashes escaped, no line taken for a request
  string(REPLACE "\\" "\\e" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  string(APPEND gen ".SS \"fabench ${cmd}\"\n.nf\n${text}.fi\n")
endforeach()
get_filename_component(dir ${OUT} DIRECTORY)
file(MAKE_DIRECTORY ${dir})
file(WRITE ${dir}/commands.h2m "${gen}")

# help2man knows "Usage:" and "Commands:" only capitalised: it reads the main help through a
# wrapper named fabench that capitalises the two
file(MAKE_DIRECTORY ${dir}/wrap)
file(WRITE ${dir}/wrap/fabench
     "#!/bin/sh\n'${FABENCH}' \"$@\" | sed -e 's/^usage:/Usage:/' -e 's/^commands:/Commands:/'\n")
file(CHMOD ${dir}/wrap/fabench PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
     GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
execute_process(
  COMMAND ${HELP2MAN} --no-info --section=1 --version-string=${VERSION}
          "--name=network-fabric benchmarks for data-parallel training"
          --include=${STATIC} --include=${dir}/commands.h2m --output=${dir}/fabench.1 ${dir}/wrap/fabench
  RESULT_VARIABLE rc TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "help2man failed (${rc})")
endif()
# compressed as Debian keeps man pages (-n: no name or time stamp in the file)
execute_process(COMMAND gzip -9nf ${dir}/fabench.1 RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip of the man page failed (${rc})")
endif()
if(NOT "${dir}/fabench.1.gz" STREQUAL "${OUT}")
  file(RENAME ${dir}/fabench.1.gz ${OUT})
endif()
