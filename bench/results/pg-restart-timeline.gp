set terminal pngcairo size 1000,820 font 'sans,10'
set output 'pg-restart-timeline.png'
set multiplot layout 2,1 title 'walhook-bench pg-restart (first run of each)'
set grid
set key top left
set xlabel 'seconds since the load started'
set ylabel 'backlog (deliveries committed − received)'
plot 'data/pg-restart-200-ev-s-3-restart-m-fast-walhook.timeline' using 1:2 with lines lw 2 lc 1 title 'walhook, 200 ev/s, 3 × restart -m fast', 'data/pg-restart-200-ev-s-3-restart-m-fast-record-all-state-store-writes-in-flight-walhook.timeline' using 1:2 with lines lw 2 lc 2 title 'walhook, 200 ev/s, 3 × restart -m fast, --record=all (state-store writes in flight)', 'data/pg-restart-idle-1-restart-m-fast-walhook.timeline' using 1:2 with lines lw 2 lc 3 title 'walhook, idle, 1 × restart -m fast'
set ylabel 'slot lag (MiB)'
plot 'data/pg-restart-200-ev-s-3-restart-m-fast-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 1 title 'walhook, 200 ev/s, 3 × restart -m fast (unconfirmed)', 'data/pg-restart-200-ev-s-3-restart-m-fast-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 1 title 'walhook, 200 ev/s, 3 × restart -m fast (not yet sent)', 'data/pg-restart-200-ev-s-3-restart-m-fast-record-all-state-store-writes-in-flight-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 2 title 'walhook, 200 ev/s, 3 × restart -m fast, --record=all (state-store writes in flight) (unconfirmed)', 'data/pg-restart-200-ev-s-3-restart-m-fast-record-all-state-store-writes-in-flight-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 2 title 'walhook, 200 ev/s, 3 × restart -m fast, --record=all (state-store writes in flight) (not yet sent)', 'data/pg-restart-idle-1-restart-m-fast-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 3 title 'walhook, idle, 1 × restart -m fast (unconfirmed)', 'data/pg-restart-idle-1-restart-m-fast-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 3 title 'walhook, idle, 1 × restart -m fast (not yet sent)'
unset multiplot
