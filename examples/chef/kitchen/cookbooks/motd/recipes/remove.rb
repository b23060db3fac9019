# Removes the greeting file when the stack is deleted (its deployment lists only DELETE).

file "#{node['workdir']}/motd" do
  action :delete
end
