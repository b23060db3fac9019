name 'motd'
version '1.0.0'
